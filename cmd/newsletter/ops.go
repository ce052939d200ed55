package main

import (
	"context"
	"errors"
	"io"
)

func importCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("not available yet")
}

func digestCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return errors.New("not available yet")
}
