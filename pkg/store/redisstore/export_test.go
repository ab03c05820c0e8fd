package redisstore

// ServerCheck is serverCheck, for the tests of what it reports.
const ServerCheck = serverCheck

// SlotMapRetry is slotMapRetry, for the tests of lookups after a failure.
const SlotMapRetry = slotMapRetry
