package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/runstream/runstream/seal"
)

// sealKeyEnv names the environment variable that holds the seal key
// itself (base64 of 32 bytes); a flag would show it in the process list.
const sealKeyEnv = "RUNSTREAM_SEAL_KEY"

// sealKeyFileName is the seal key's file in the data directory.
const sealKeyFileName = "seal.key"

// newSealer returns the sealer of stored resume tokens: the key of
// RUNSTREAM_SEAL_KEY, else of --seal-key-file, else, for a memory store, a
// random key of this process, else the key of DATA_DIR/seal.key (created
// with mode 0600 when missing). Without a data directory the key is random
// and the tokens of runs awaiting input do not survive a restart, which
// is logged.
func newSealer(cfg serveConfig, storeName string, logger *slog.Logger) (*seal.Sealer, error) {
	var key []byte
	var err error
	switch {
	case cfg.sealKey != "" && cfg.sealKeyFile != "":
		return nil, fmt.Errorf("%w: set %s or --seal-key-file, not both", errUsage, sealKeyEnv)
	case cfg.sealKey != "":
		if key, err = seal.ParseKey(cfg.sealKey); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", errUsage, sealKeyEnv, err)
		}
	case cfg.sealKeyFile != "":
		if key, err = seal.LoadKeyFile(cfg.sealKeyFile, false); err != nil {
			return nil, fmt.Errorf("%w: --seal-key-file: %w", errUsage, err)
		}
	case storeName == "memory":
		return seal.NewRandom(), nil
	case cfg.dataDir != "":
		if key, err = seal.LoadKeyFile(filepath.Join(cfg.dataDir, sealKeyFileName), true); err != nil {
			return nil, err
		}
	default:
		logger.Warn("no seal key (" + sealKeyEnv + ", --seal-key-file or --data-dir): resume tokens are sealed with a key of this process, and runs awaiting input cannot be resumed after a restart")
		return seal.NewRandom(), nil
	}
	return seal.New(key)
}
