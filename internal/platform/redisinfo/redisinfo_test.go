package redisinfo

import (
	"maps"
	"testing"
)

func TestFields(t *testing.T) {
	for _, tc := range []struct {
		name, info string
		want       map[string]string
	}{
		{"empty", "", map[string]string{}},
		{"a replica's replication section", "# Replication\r\nrole:slave\r\nmaster_host:127.0.0.1\r\nmaster_port:6379\r\nmaster_link_status:up\r\n\r\n",
			map[string]string{"role": "slave", "master_host": "127.0.0.1", "master_port": "6379", "master_link_status": "up"}},
		{"colons in a value", "master_host:::1\ncmdstat_get:calls=3,usec=5\n", map[string]string{"master_host": "::1", "cmdstat_get": "calls=3,usec=5"}},
		{"no colon, no name, repeated", "junk\n:v\nrole:master\nrole:slave\n", map[string]string{"role": "slave"}},
		{"two sections", "# Server\nredis_version:7.0.15\n# Clients\nconnected_clients:2", map[string]string{"redis_version": "7.0.15", "connected_clients": "2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Fields(tc.info); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
