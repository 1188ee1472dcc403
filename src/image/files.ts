// Small filesystem primitives of the base image build: an existence probe, temporary names
// unique per writer, and write-then-rename.
//
// Invariants:
// - `uniqueSuffix` differs between concurrent writers, in one process or several, so two builds
//   never share a temporary file.
// - `writeFileAtomic` leaves either the old file or the complete new one under `file`, never a
//   partial write.
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';

export async function fileExists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}

/** Unique per writer, even for concurrent writers in one process. */
export function uniqueSuffix(): string {
  return `${process.pid}-${randomBytes(4).toString('hex')}`;
}

export async function writeFileAtomic(file: string, data: string): Promise<void> {
  const tmp = `${file}.${uniqueSuffix()}.tmp`;
  await fs.writeFile(tmp, data);
  await fs.rename(tmp, file);
}
