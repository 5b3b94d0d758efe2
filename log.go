package main

import "log/slog"

// This file holds the logging rule every layer shares.

// orDiscard returns logger, or one that discards when it is nil. It is
// the one rule for a logger left out: code below the constructors that
// call it never sees a nil logger.
func orDiscard(logger *slog.Logger) *slog.Logger {
	if logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return logger
}
