/** Whether a promise has settled after pending callbacks ran (tests of waits that must not resolve yet). */
import { setImmediate as nextTurn } from 'node:timers/promises';

/** True when `p` settled (either way) within two turns of the event loop. */
export async function isSettled(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  await nextTurn();
  await nextTurn();
  return settled;
}
