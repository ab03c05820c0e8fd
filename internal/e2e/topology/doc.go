// Package topology holds end-to-end tests of Weir on the production
// topology (issue 15): a three-member etcd, a three-broker Kafka-protocol
// cluster with a multi-partition usage topic, several limiter instances per
// DC sharing the DC's Redis, and coordinators in processes apart from etcd
// and the brokers. Every member, broker, Redis and limiter is real and runs
// on loopback; the tests kill them one at a time and check what the system
// promises through each loss.
package topology
