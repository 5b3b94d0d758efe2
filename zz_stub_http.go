package main

import (
	"context"
	"log/slog"
)

type streamableTransport struct{ transport }

func newStreamableTransport(cfg serverConfig, logger *slog.Logger) *streamableTransport { return nil }

type sseTransport struct{ transport }

func newSSETransport(ctx context.Context, cfg serverConfig, logger *slog.Logger) (*sseTransport, error) {
	return nil, nil
}
