'use strict';
// fault.test.js with a lazy feeder (workers.feeder.mode: lazy): kill -9 of every process and
// feeder pauses while the feeder gathers, so a killed leader loses its gathering and its
// successor must gather it again from the last token it saved.
process.env.HALO_FEEDER_MODE = 'lazy';
require('./fault.test.js');
