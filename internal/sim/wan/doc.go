// Package wan emulates a wide-area network between DCs on one Linux host,
// for the simulator (weirsim --wan) and its tests: each DC gets its own
// network namespace, joined by a veth pair to a router namespace, and the
// control plane (the calling process, in the root namespace) reaches the
// router through one more veth pair, the core link. The router namespace
// routes every packet it receives from a link into a TUN device, where
// this package holds it for the one-way delay between its source and
// destination sites and writes it back; the kernel then forwards it to
// its link. Delays change at run time (Net.SetDelay) and a DC is cut off
// by taking its link down (Net.Partition).
//
// It needs root, /dev/net/tun and the ip command (Supported says what is
// missing), but not netem or iptables. Nothing it creates routes beyond
// loopback and its own namespaces: Up picks a 10.X.0.0/16 that no route
// or address of the host overlaps, and checks the routes before any
// packet is sent. Net.Close removes everything; Cleanup removes what a
// crashed run left.
//
// Sockets are put in a DC's namespace by Net.DialContext and Net.Listen,
// and programs by Net.Command.
package wan
