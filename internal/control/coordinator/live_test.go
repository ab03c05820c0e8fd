package coordinator

import "testing"

func TestHTTPURL(t *testing.T) {
	tests := []struct {
		name, scheme, addr, want string
	}{
		{"record without a scheme (older limiters)", "", "10.0.0.1:8080", "http://10.0.0.1:8080"},
		{"http", "http", "10.0.0.1:8080", "http://10.0.0.1:8080"},
		{"https", "https", "lim-1.eu:8443", "https://lim-1.eu:8443"},
		{"unknown scheme", "gopher", "10.0.0.1:70", ""},
		{"no address", "https", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := httpURL(tt.scheme, tt.addr); got != tt.want {
				t.Errorf("httpURL(%q, %q): got %q, want %q", tt.scheme, tt.addr, got, tt.want)
			}
		})
	}
}
