package scram

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestRFC7677Vector runs the SCRAM-SHA-256 example exchange of RFC 7677
// section 3 with the server nonce pinned.
func TestRFC7677Vector(t *testing.T) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred := DeriveWith(SHA256, "pencil", salt, 4096)
	s := NewServer(SHA256)
	s.serverNonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }

	user, err := s.Start([]byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO"))
	if err != nil || user != "user" {
		t.Fatalf("start: user %q, err %v", user, err)
	}
	first, err := s.Challenge(cred)
	if err != nil {
		t.Fatal(err)
	}
	if want := "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"; string(first) != want {
		t.Fatalf("server-first:\n got %s\nwant %s", first, want)
	}
	final, err := s.Finish([]byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="))
	if err != nil {
		t.Fatal(err)
	}
	if want := "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="; string(final) != want {
		t.Fatalf("server-final:\n got %s\nwant %s", final, want)
	}
}

// exchange runs franz-go's SCRAM client against a Server holding cred.
func exchange(t *testing.T, m Mechanism, cred Credential, user, pass string) error {
	t.Helper()
	a := scram.Auth{User: user, Pass: pass}
	mech := a.AsSha256Mechanism()
	if m.Name == SHA512.Name {
		mech = a.AsSha512Mechanism()
	}
	sess, clientFirst, err := mech.Authenticate(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(m)
	got, err := s.Start(clientFirst)
	if err != nil {
		return err
	}
	if got != user {
		t.Fatalf("user %q, want %q", got, user)
	}
	serverFirst, err := s.Challenge(cred)
	if err != nil {
		return err
	}
	done, clientFinal, err := sess.Challenge(serverFirst)
	if err != nil || done {
		t.Fatalf("client on server-first: done %v, err %v", done, err)
	}
	serverFinal, err := s.Finish(clientFinal)
	if err != nil {
		return err
	}
	if done, _, err := sess.Challenge(serverFinal); err != nil || !done {
		t.Fatalf("client refused server-final: done %v, err %v", done, err)
	}
	return nil
}

func TestRoundTrip(t *testing.T) {
	for _, m := range Mechanisms {
		t.Run(m.Name, func(t *testing.T) {
			cred := Derive(m, "s3cret")
			if cred.Iterations != Iterations || len(cred.Salt) == 0 || cred.Mechanism != m.Name {
				t.Fatalf("credential %+v", cred)
			}
			if err := exchange(t, m, cred, "SLKAAAAAAAAAAAAAAAA", "s3cret"); err != nil {
				t.Fatalf("right secret refused: %v", err)
			}
			if err := exchange(t, m, cred, "SLKAAAAAAAAAAAAAAAA", "wrong"); !errors.Is(err, ErrProof) {
				t.Fatalf("wrong secret: err %v, want ErrProof", err)
			}
		})
	}
}

func TestDeriveSaltsDiffer(t *testing.T) {
	a, b := Derive(SHA512, "x"), Derive(SHA512, "x")
	if bytes.Equal(a.Salt, b.Salt) || bytes.Equal(a.StoredKey, b.StoredKey) {
		t.Fatal("two derivations share a salt")
	}
	if len(a.StoredKey) != 64 || len(a.ServerKey) != 64 {
		t.Fatalf("SHA-512 keys of %d and %d bytes", len(a.StoredKey), len(a.ServerKey))
	}
}

func TestBadMessages(t *testing.T) {
	cred := DeriveWith(SHA256, "pencil", []byte("salt"), 4096)
	for _, tc := range []struct {
		name       string
		first      string
		final      string // empty: Start must fail
		wantStart  error
		wantFinish error
	}{
		{name: "channel binding required", first: "p=tls-unique,,n=user,r=abc", wantStart: ErrChannelBinding},
		{name: "channel binding y", first: "y,,n=user,r=abc", wantStart: ErrChannelBinding},
		{name: "no gs2 header", first: "n=user,r=abc", wantStart: ErrMalformed},
		{name: "empty user", first: "n,,n=,r=abc", wantStart: ErrMalformed},
		{name: "bad escape", first: "n,,n=us=er,r=abc", wantStart: ErrMalformed},
		{name: "mandatory extension", first: "n,,m=x,n=user,r=abc", wantStart: ErrMalformed},
		{name: "other authzid", first: "n,a=other,n=user,r=abc", wantStart: ErrMalformed},
		{name: "nonce changed", first: "n,,n=user,r=abc", final: "c=biws,r=abcX,p=AAAA", wantFinish: ErrNonce},
		{name: "nonce with another prefix", first: "n,,n=user,r=abc", final: "c=biws,r=xabcSRV,p=AAAA", wantFinish: ErrNonce},
		{name: "nonce with the client nonce repeated (librdkafka)", first: "n,,n=user,r=abc", final: "c=biws,r=abcabcSRV,p=AAAA", wantFinish: ErrProof},
		{name: "binding changed", first: "n,,n=user,r=abc", final: "c=eSws,r=abcSRV,p=AAAA", wantFinish: ErrChannelBinding},
		{name: "short proof", first: "n,,n=user,r=abc", final: "c=biws,r=abcSRV,p=AAAA", wantFinish: ErrProof},
		{name: "no proof", first: "n,,n=user,r=abc", final: "c=biws,r=abcSRV", wantFinish: ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewServer(SHA256)
			s.serverNonce = func() string { return "SRV" }
			_, err := s.Start([]byte(tc.first))
			if !errors.Is(err, tc.wantStart) {
				t.Fatalf("start: err %v, want %v", err, tc.wantStart)
			}
			if err != nil {
				return
			}
			if _, err := s.Challenge(cred); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Finish([]byte(tc.final)); !errors.Is(err, tc.wantFinish) {
				t.Fatalf("finish: err %v, want %v", err, tc.wantFinish)
			}
		})
	}
}

func TestOutOfOrder(t *testing.T) {
	s := NewServer(SHA256)
	if _, err := s.Finish([]byte("c=biws,r=x,p=AAAA")); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("finish first: %v", err)
	}
	s = NewServer(SHA256)
	if _, err := s.Start([]byte("n,,n=user,r=abc")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Challenge(Derive(SHA512, "x")); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("credential of another mechanism: %v", err)
	}
}

// FuzzServer feeds arbitrary client messages to an exchange. Invariant: it
// never panics, and a client that does not know the secret never finishes.
func FuzzServer(f *testing.F) {
	f.Add([]byte("n,,n=user,r=abc"), []byte("c=biws,r=abcSRV,p=AAAA"))
	cred := DeriveWith(SHA256, "pencil", []byte("salt"), 4096)
	f.Fuzz(func(t *testing.T, first, final []byte) {
		s := NewServer(SHA256)
		s.serverNonce = func() string { return "SRV" }
		if _, err := s.Start(first); err != nil {
			return
		}
		if _, err := s.Challenge(cred); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Finish(final); err == nil {
			t.Fatalf("finished without the secret: %q %q", first, final)
		}
	})
}

// BenchmarkServerExchange is the server's share of one SCRAM-SHA-256
// login: parse, challenge and check the proof (RFC 7677's messages).
func BenchmarkServerExchange(b *testing.B) {
	salt, _ := base64.StdEncoding.DecodeString("W22ZaJ0SNY7soEsUEjb6gQ==")
	cred := DeriveWith(SHA256, "pencil", salt, 4096)
	first := []byte("n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
	final := []byte("c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
	b.ReportAllocs()
	for b.Loop() {
		s := NewServer(SHA256)
		s.serverNonce = func() string { return "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0" }
		if _, err := s.Start(first); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Challenge(cred); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Finish(final); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDerive is the control plane's cost of one mechanism's
// credential when a key is created.
func BenchmarkDerive(b *testing.B) {
	for _, m := range Mechanisms {
		b.Run(m.Name, func(b *testing.B) {
			for b.Loop() {
				Derive(m, "s3cret")
			}
		})
	}
}
