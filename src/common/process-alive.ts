/** Whether a process id is alive on this host (signal 0 probes without signalling). */

/** True when a process with this id exists, also when it belongs to another user (EPERM). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
