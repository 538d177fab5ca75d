/**
 * The engine binding of a voice: which synthesis engine speaks for it and with which parameters.
 * A binding may only *name* an operator-configured remote endpoint, never carry a URL.
 */
import { z } from 'zod';

export const voiceBindingSchema = z.discriminatedUnion('engine', [
  z.object({
    engine: z.literal('espeak'),
    voice: z.string().regex(/^[A-Za-z0-9_/-]{1,32}$/, 'must be an espeak-ng voice name such as en-us'),
    variant: z
      .string()
      .regex(/^[A-Za-z0-9_-]{1,32}$/, 'must be an espeak-ng variant such as f3')
      .optional(),
    pitch: z.number().int().min(0).max(99).optional(),
  }),
  z.object({
    engine: z.literal('remote'),
    endpoint: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must name an operator-configured endpoint'),
    voice: z.string().min(1).max(200),
    model: z.string().min(1).max(200).optional(),
  }),
]);

export type VoiceBinding = z.infer<typeof voiceBindingSchema>;

/** Engine knowledge the voice domain needs, provided by the audio module. */
export interface EngineCatalog {
  /** Throws VALIDATION_INVALID_VALUE when the binding names an unknown engine voice or endpoint. */
  validateBinding(binding: VoiceBinding): void;
  /** The embedded engine's default binding for a language (English when absent). */
  defaultBinding(language: string): VoiceBinding;
}
