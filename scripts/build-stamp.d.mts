// Types of build-stamp.mjs (plain JavaScript: it runs before any compiled code) for the tests.
export declare const STAMP_FILE: string;
export declare function sourceHash(root: string): string;
export declare function readStamp(root: string): { sourceHash: string; builtAt?: string } | undefined;
export type BuildState = 'fresh' | 'missing' | 'stale' | 'no-sources';
export declare function buildState(root: string): BuildState;
export declare function buildProblem(root: string): string | undefined;
export declare function requireFreshBuild(root: string): void;
