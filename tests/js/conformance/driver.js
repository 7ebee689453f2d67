'use strict';
// The driver the conformance runner uses: the Node driver the vendored specification
// tests come from (v6.21.0, ../shared/conformance/README.md), installed as the npm alias
// `mongodb-6`. The 7.x driver the other suites use sends what these tests do not expect
// (wtimeout: 10000 with every commitTransaction that has a write concern; one readConcern
// object shared between a transaction's commands), which would fail tests for reasons
// outside the server. Every conformance module takes its BSON types from here too, so that
// instanceof checks see the driver's own classes.
module.exports = require('mongodb-6');
