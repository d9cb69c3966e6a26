'use strict'
// peerCredentials(fd) -> { pid, uid, gid } of the process that connected a unix socket.
module.exports = require('./build/Release/peercred.node')
