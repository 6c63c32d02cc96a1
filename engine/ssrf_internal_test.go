package engine

import (
	"errors"
	"testing"
)

// TestGuardControl: the dial-time guard refuses every address that is not
// public, IPv4-mapped forms included, unless the allow list names it.
func TestGuardControl(t *testing.T) {
	t.Parallel()
	refused := []string{
		"127.0.0.1:80", "127.1.2.3:80", "[::1]:80", "[::ffff:127.0.0.1]:80", "[::ffff:10.0.0.1]:80",
		"0.0.0.0:80", "[::]:80", "10.1.2.3:80", "172.16.0.1:80", "192.168.1.1:80", "[fd00::1]:80",
		"169.254.169.254:80", "[fe80::1]:80", "[::ffff:169.254.169.254]:80", "100.64.0.1:80",
		"224.0.0.1:80", "[64:ff9b::7f00:1]:80", "[2002:7f00:1::]:80", "255.255.255.255:80", "not-an-address",
	}
	guard := guardControl(HTTPAllowList{})
	for _, a := range refused {
		if err := guard("tcp", a, nil); !errors.Is(err, errAddressNotAllowed) {
			t.Errorf("%s: %v, want refused", a, err)
		}
	}
	for _, a := range []string{"8.8.8.8:443", "[2606:4700::1111]:443", "93.184.216.34:80"} {
		if err := guard("tcp", a, nil); err != nil {
			t.Errorf("%s: %v, want allowed", a, err)
		}
	}
	allow, err := ParseHTTPAllowList("10.0.0.0/8,::1,169.254.169.254")
	if err != nil {
		t.Fatal(err)
	}
	guard = guardControl(allow)
	for _, a := range []string{"10.9.9.9:80", "[::ffff:10.0.0.1]:80", "[::1]:80", "169.254.169.254:80"} {
		if err := guard("tcp", a, nil); err != nil {
			t.Errorf("%s with the allow list: %v", a, err)
		}
	}
	if err := guard("tcp", "127.0.0.1:80", nil); err == nil {
		t.Errorf("127.0.0.1 was allowed by a list that does not name it")
	}
}
