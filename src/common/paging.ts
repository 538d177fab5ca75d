/** Query parameters of list endpoints: limit 1–50 (default 20) and offset. */
import { z } from 'zod';

export const pageSchema = z.object({
  limit: z.coerce.number().int().min(1).max(50).default(20),
  offset: z.coerce.number().int().min(0).default(0),
});
