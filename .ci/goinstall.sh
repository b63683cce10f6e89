# Sourced, not run, by the scripts in tools.d and bench.d that build a tool
# from its Go module into .cache/bin. It sets root (the repository) and bin
# (.cache/bin) and defines go_install; the script sets want (the version)
# and defines have, true when that exact version is already in $bin.

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/.cache/bin"

# go_install WHAT NOTE ARGS...: nothing when have is true; otherwise says
# that it installs WHAT (NOTE, how long that takes, in brackets unless
# empty) and runs go install ARGS into $bin. Settings for go, such as
# GOFLAGS, go before the call.
go_install() {
	local what=$1 note=$2
	shift 2
	if have; then
		return 0
	fi
	echo "installing $what into $bin${note:+ ($note)}" >&2
	mkdir -p "$bin"
	GOBIN="$bin" go install "$@"
}
