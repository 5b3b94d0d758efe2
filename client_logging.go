package main

import (
	"context"
	"log/slog"
)

// This file holds a server's logging: the level asked of it
// (logging/setLevel) and the mapping of its log levels onto slog's.

// applyLogLevel sends logging/setLevel with the configured log_level, when
// there is one and the server offers logging. A refusal is logged, not
// fatal: the server keeps its own level.
func (c *mcpClient) applyLogLevel(ctx context.Context) {
	if c.cfg.LogLevel == "" {
		return
	}
	if c.capabilities().Logging == nil {
		c.logger.Warn("log_level is set but the server does not offer logging; ignoring it", "log_level", c.cfg.LogLevel)
		return
	}
	if _, err := c.roundTrip(ctx, rpcRequest{method: "logging/setLevel", params: map[string]string{"level": c.cfg.LogLevel}}); err != nil {
		c.logger.Warn("logging/setLevel failed; the server keeps its own level", "log_level", c.cfg.LogLevel, "err", err)
	}
}

// mcpLogLevel maps an MCP (syslog) log level onto slog's.
func mcpLogLevel(level string) slog.Level {
	switch level {
	case "debug":
		return slog.LevelDebug
	case "info", "notice":
		return slog.LevelInfo
	case "warning":
		return slog.LevelWarn
	case "error", "critical", "alert", "emergency":
		return slog.LevelError
	}
	return slog.LevelInfo
}
