package memstore

import (
	"context"
	"time"

	"github.com/newsletter/newsletter/internal/adminauth"
	"github.com/newsletter/newsletter/store"
)

// CreateToken implements store.Tokens.
func (m *Memory) CreateToken(_ context.Context, hash string, t adminauth.StoredToken) (adminauth.StoredToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tokens == nil {
		m.tokens = map[string]adminauth.StoredToken{}
	}
	if _, taken := m.tokens[hash]; taken {
		return adminauth.StoredToken{}, store.ErrTokenNameTaken
	}
	for _, have := range m.tokens {
		if have.Name == t.Name {
			return adminauth.StoredToken{}, store.ErrTokenNameTaken
		}
	}
	if len(m.tokens) >= store.MaxTokens {
		return adminauth.StoredToken{}, store.ErrTooManyTokens
	}
	t.Created = m.now().Truncate(time.Millisecond).UTC()
	m.tokens[hash] = t
	return t, nil
}

// LookupToken implements store.Tokens.
func (m *Memory) LookupToken(_ context.Context, hash string) (adminauth.Principal, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tokens[hash]
	if !ok {
		return adminauth.Principal{}, adminauth.ErrUnknownToken
	}
	return adminauth.Principal{Name: t.Name, Role: t.Role}, nil
}

// ListTokens implements store.Tokens.
func (m *Memory) ListTokens(context.Context) ([]adminauth.StoredToken, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	list := make([]adminauth.StoredToken, 0, len(m.tokens))
	for _, t := range m.tokens {
		list = append(list, t)
	}
	store.SortTokens(list)
	return list, nil
}

// RevokeToken implements store.Tokens.
func (m *Memory) RevokeToken(_ context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for h, t := range m.tokens {
		if t.Name == name {
			delete(m.tokens, h)
			return nil
		}
	}
	return store.ErrTokenNotFound
}
