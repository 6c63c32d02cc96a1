//go:build !linux && !darwin

package main

import "errors"

// freeBytes is not implemented on this system.
func freeBytes(string) (uint64, error) {
	return 0, errors.New("free space is not measured on this system")
}
