package netsim

import (
	"bufio"
	"net"
	"testing"
	"time"
)

// echo serves lines back on a loopback port until the test ends.
func echo(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := c.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

func roundTrip(c net.Conn) error {
	if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	_, err := bufio.NewReader(c).ReadString('\n')
	return err
}

func TestProxyDelayAndPartition(t *testing.T) {
	p, err := Listen(echo(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := roundTrip(c); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.SetDelay(100 * time.Millisecond)
	start := time.Now()
	if err := roundTrip(c); err != nil {
		t.Fatal(err)
	}
	// The delay applies each way: a round trip cannot take less than 200ms.
	if rtt := time.Since(start); rtt < 200*time.Millisecond {
		t.Errorf("round trip %v with a 100ms one-way delay", rtt)
	}
	p.SetDelay(0)

	p.SetDown(true)
	if err := roundTrip(c); err == nil {
		t.Fatal("an open connection survived the partition")
	}
	if c2, err := net.Dial("tcp", p.Addr()); err == nil {
		if roundTrip(c2) == nil {
			t.Fatal("a new connection got through the partition")
		}
		c2.Close()
	}
	p.SetDown(false)
	c3, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	if err := roundTrip(c3); err != nil {
		t.Fatalf("after the partition healed: %v", err)
	}
}
