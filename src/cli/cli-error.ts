/** A CLI failure with its exit code: 1 = the operation failed, 2 = the CLI could not reach or pick its target. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
  ) {
    super(message);
    this.name = 'CliError';
  }
}
