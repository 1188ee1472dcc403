// The existence probe of the base image build. Atomic writes and staging names are
// durable-files' (writeFileAtomic, stagingPath).
import * as fs from 'node:fs/promises';

export async function fileExists(file: string): Promise<boolean> {
  try {
    await fs.access(file);
    return true;
  } catch {
    return false;
  }
}
