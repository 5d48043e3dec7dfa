// The test machine's stand-in for the cloud's storage and remote state.
import { appendFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * What stands for the cloud and for remote state on a test machine: the drift beds' `local_file`
 * targets and their local backends' state files live below it. A sandboxed engine may write it,
 * as a real one reaches its cloud and its backend over the network.
 */
export function testCloudDir(): string {
  const dir = join(tmpdir(), 'kumoss-test-cloud');
  mkdirSync(dir, { recursive: true });
  return dir;
}

/**
 * The test cloud's network destinations (the drift beds' object APIs): what the tests' sandboxed
 * engines may reach besides their own run's endpoints, as `engine.egress_allow` names them on a
 * real worker. Kept in a file of this process, so that a worker in a child process
 * (test/support/processes.ts) reads the beds made after it started: KUMOSS_TEST_EGRESS_FILE.
 */
const egressFile = join(testCloudDir(), `egress-${process.pid}.txt`);

/** Lets the tests' engines reach `url` (a test cloud API on loopback). */
export function allowTestEgress(url: string): void {
  appendFileSync(egressFile, `${url}\n`);
}

/** The file of this process's test cloud destinations (for a worker in a child process). */
export function testEgressFile(): string {
  return egressFile;
}

export function testEgressAllowed(): string[] {
  const read = (f: string | undefined) =>
    f && existsSync(f) ? readFileSync(f, 'utf8').split('\n').filter(Boolean) : [];
  return [...new Set([...read(egressFile), ...read(process.env.KUMOSS_TEST_EGRESS_FILE)])];
}
