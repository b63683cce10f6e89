package launch

import "testing"

func TestWithDatabase(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		wantErr        bool
	}{
		{"keeps user, host and query", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "postgres://postgres@127.0.0.1:5432/x_1?sslmode=disable", false},
		{"no path", "postgresql://u:p@h:1", "postgresql://u:p@h:1/x_1", false},
		{"not postgres", "http://h/x", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := withDatabase(tc.in, "x_1")
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("withDatabase(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.wantErr)
			}
		})
	}
}
