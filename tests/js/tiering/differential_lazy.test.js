'use strict';
// differential.test.js with a lazy feeder (workers.feeder.mode: lazy): the archive gets
// each document when a read that cannot be merged asks for it, so the merged reads, the
// evictor and the warmer all race a feeder that is behind on purpose.
process.env.HALO_FEEDER_MODE = 'lazy';
require('./differential.test.js');
