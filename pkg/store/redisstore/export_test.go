package redisstore

// ServerCheck is serverCheck, for the tests of what it reports.
const ServerCheck = serverCheck
