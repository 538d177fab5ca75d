#!/usr/bin/env node
// Commit subjects of at most 72 characters, so `git log --oneline` stays readable; the why goes in
// the body. Two uses:
//   node scripts/check-commit-msg.mjs <message-file>   the commit-msg hook (.githooks/commit-msg)
//   node scripts/check-commit-msg.mjs --new-commits [<base>]
//                                                      CI: every commit after BASELINE (or <base>) up to HEAD
// History before BASELINE is published and cannot be rewritten, so it is not checked.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const MAX_SUBJECT = 72;
/** The last commit before the subject rule: commits after it are checked. */
const BASELINE = '9f0bb4838b550ced382516e84876b15820b016cc';

/**
 * The subject of a commit message as `git log` shows it (%s): its first paragraph, lines joined by
 * spaces, comment lines left out.
 */
function subjectOf(message) {
  const lines = [];
  for (const line of message.split('\n')) {
    if (line.startsWith('#')) continue;
    if (line.trim() === '') {
      if (lines.length > 0) break;
      continue;
    }
    lines.push(line.trim());
  }
  return lines.join(' ');
}

/** Why `subject` is refused, or null. Lengths count characters, not bytes. */
function subjectProblem(subject) {
  const length = [...subject].length;
  if (length === 0) return 'the subject is empty';
  if (length > MAX_SUBJECT)
    return `the subject has ${length} characters; at most ${MAX_SUBJECT} (put the why in the body)`;
  return null;
}

function git(...args) {
  return execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function checkNewCommits(base) {
  try {
    git('cat-file', '-e', `${base}^{commit}`);
  } catch {
    console.error(
      `check-commit-msg: baseline ${base.slice(0, 7)} is not in this clone (a shallow clone?); fetch the full history`,
    );
    return 1;
  }
  const log = git('log', '--format=%h%x00%s', `${base}..HEAD`);
  let refused = 0;
  for (const line of log.split('\n')) {
    if (line === '') continue;
    const [hash, subject = ''] = line.split('\0');
    const problem = subjectProblem(subject);
    if (problem === null) continue;
    refused++;
    console.error(`${hash} ${subject}\n  ${problem}`);
  }
  if (refused > 0) {
    console.error(`check-commit-msg: ${refused} commit subject(s) after ${base.slice(0, 7)} are too long`);
    return 1;
  }
  return 0;
}

function checkMessageFile(path) {
  const subject = subjectOf(readFileSync(path, 'utf8'));
  const problem = subjectProblem(subject);
  if (problem === null) return 0;
  console.error(`commit-msg: ${problem}:\n  ${subject}`);
  return 1;
}

const [arg, base = BASELINE] = process.argv.slice(2);
if (arg === undefined) {
  console.error('usage: check-commit-msg.mjs <message-file> | --new-commits [<base>]');
  process.exit(2);
}
process.exit(arg === '--new-commits' ? checkNewCommits(base) : checkMessageFile(arg));
