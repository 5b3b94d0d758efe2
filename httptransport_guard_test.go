package main

import (
	"net"
	"strings"
	"testing"
)

// TestBlockedAddresses is the table of the addresses untrusted servers
// (per-run url of a non-admin key, connect_mcp) never reach, in every
// form a dial could take, and of neighbours that stay reachable.
func TestBlockedAddresses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr    string
		blocked bool
	}{
		{"169.254.169.254", true},
		{"fd00:ec2::254", true},
		{"fe80::1", true},
		{"100.100.100.200", true}, // Alibaba
		{"192.0.0.192", true},     // Oracle
		{"168.63.129.16", true},   // Azure wire server
		{"::ffff:100.100.100.200", true},
		{"64:ff9b::a9fe:a9fe", true},             // NAT64 of 169.254.169.254
		{"64:ff9b::6464:64c8", true},             // NAT64 of 100.100.100.200
		{"64:ff9b::c000:c0", true},               // NAT64 of 192.0.0.192
		{"2002:a83f:8110::1", true},              // 6to4 of 168.63.129.16
		{"2002:a9fe:a9fe::", true},               // 6to4 of 169.254.169.254
		{"2001:0:a9fe:a9fe::1", true},            // Teredo, server 169.254.169.254
		{"2001:0:4136:e378:0:0:5601:5601", true}, // Teredo, client 169.254.169.254 (inverted)
		{"100.100.100.201", false},
		{"192.0.0.193", false},
		{"168.63.129.17", false},
		{"127.0.0.1", false},
		{"10.0.0.1", false},
		{"64:ff9b::a00:1", false}, // NAT64 of 10.0.0.1
		{"2002:a00:1::", false},
		{"2001:db8::1", false},
	}
	for _, tt := range tests {
		ip := net.ParseIP(tt.addr)
		if ip == nil {
			t.Fatalf("bad test address %q", tt.addr)
		}
		if got := isBlockedIP(ip); got != tt.blocked {
			t.Errorf("isBlockedIP(%s) = %v, want %v", tt.addr, got, tt.blocked)
		}
		host := tt.addr
		if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		err := checkUntrustedURL("http://"+host+":8080/mcp", nil)
		if (err != nil) != tt.blocked {
			t.Errorf("checkUntrustedURL(%s) = %v, want blocked %v", host, err, tt.blocked)
		}
		if err := refuseBlockedAddress("tcp", net.JoinHostPort(tt.addr, "80"), nil); (err != nil) != tt.blocked {
			t.Errorf("refuseBlockedAddress(%s) = %v, want blocked %v", tt.addr, err, tt.blocked)
		}
	}
}
