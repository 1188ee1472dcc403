/** `npm run bench`: every benchmark in turn, each printing its JSON. */
await import('./cold-start.js');
