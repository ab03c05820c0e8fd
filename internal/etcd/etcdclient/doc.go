// Package etcdclient builds the etcd client of every Weir process that
// talks to etcd (the limiter and the coordinator), from one Config: the
// endpoints, and how the client checks etcd and proves itself to it — TLS
// with the CA that signs etcd's certificate and an optional client
// certificate, and an optional user whose password is read from a file.
// AddFlags gives both commands the same --etcd-* flags for it, as package
// logflag does for logging.
package etcdclient
