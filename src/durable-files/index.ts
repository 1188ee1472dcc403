/** durable-files: writes that survive a crash whole or not at all (staging name, fsync, rename, fsync of the directory). */
export {
  fsyncPath,
  moveIntoPlace,
  readTextIfPresent,
  stagingPath,
  writeFileAtomic,
} from './durable-files.js';
