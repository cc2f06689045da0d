#!/usr/bin/env bash
# Set up everything eoslog needs, idempotently; shared by scripts/main.sh and scripts/test.sh.
#
#   1. a Python >= 3.11 virtual environment in .venv/ at the repository root;
#   2. eoslog installed into it, editable, with its test extras (skipped when
#      pyproject.toml has not changed since the last successful install);
#   3. kcat (used by the interop tests), installed with apt-get when missing and root;
#   4. Java 17 or newer (Spark runs on it): checked; when missing and root, installed with
#      apt-get (openjdk-17-jre-headless);
#   5. ZooKeeper (cluster mode, tests/cluster): Debian's zookeeper package, installed with
#      apt-get when missing and root;
#   5b. Chromium (the console tests drive it headless with Playwright), installed with apt-get
#      when missing and root;
#   5c. FUSE 3 (fuse3: libfuse3, fusermount3) for the power-cut tests' file system (issue 14);
#      its Python binding mfusepy comes with the test extras;
#   6. the reference implementations of reference/pom.xml (Apache Kafka, Spark's Kafka
#      connector) copied by Maven into .reference/lib/, once per pom hash (issue 12).
#
# A system dependency that is still missing after that is an ERROR saying what to install
# when the run is strict: under CI (CI=true), from scripts/test.sh (EOSLOG_STRICT_DEPS=1,
# unless the developer allowed skips with EOSLOG_ALLOW_SKIPS=1 or --allow-skips), and for
# Java with EOSLOG_REQUIRE_JAVA=1 (scripts/main.sh). Otherwise it is a warning. The tests
# themselves fail on a missing dependency too (tests/support/deps.py). Sections added for further
# dependencies report a missing one with `missing_dep` so they follow the same rule.
#
# Environment: PYTHON=/path/to/python3.11 picks the interpreter; EOSLOG_SKIP_SYSTEM_DEPS=1
# skips steps 3 to 6; JAVA_HOME, as for Spark, picks the Java ($JAVA_HOME/bin/java).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.eoslog-installed"
EXTRAS="test"

if [[ -t 1 ]]; then
    _bold=$'\e[1m' _green=$'\e[32m' _yellow=$'\e[33m' _red=$'\e[31m' _off=$'\e[0m'
else
    _bold="" _green="" _yellow="" _red="" _off=""
fi
step() { printf '%s==>%s %s\n' "$_bold" "$_off" "$*"; }
ok() { printf '    %sok%s %s\n' "$_green" "$_off" "$*"; }
warn() { printf '    %swarning:%s %s\n' "$_yellow" "$_off" "$*" >&2; }
die() { printf '%serror:%s %s\n' "$_red" "$_off" "$*" >&2; exit 1; }

is_root() { [[ "$(id -u)" -eq 0 ]]; }

truthy() { [[ "${1,,}" =~ ^(1|true|yes|on)$ ]]; }
under_ci() { truthy "${CI:-}"; }
strict_deps() { under_ci || truthy "${EOSLOG_STRICT_DEPS:-}"; }
if under_ci && truthy "${EOSLOG_ALLOW_SKIPS:-}"; then
    die "EOSLOG_ALLOW_SKIPS=1 is refused under CI=true: a CI run must run every test or fail"
fi
# missing_dep WHAT HOW [STRICT]: a system dependency is missing; an error when the run is
# strict (or STRICT is 1), else a warning. HOW says what to install.
missing_dep() {
    local what="$1" how="$2" force="${3:-0}"
    if strict_deps || [[ "$force" == "1" ]]; then
        die "missing dependency: $what
    $how"
    fi
    warn "missing dependency: $what
    $how
    The tests that need it will fail (or skip, with EOSLOG_ALLOW_SKIPS=1 / pytest --allow-skips)."
}

# retry TRIES WHAT CMD...: run CMD up to TRIES times, 5 s, 10 s, ... apart. The set-up's downloads
# (apt, PyPI, Maven Central) run on a machine that has just booted: a mirror's hiccup or the boot's
# own apt run holding dpkg's lock must not fail a whole CI run.
retry() {
    local tries="$1" what="$2" n=1
    shift 2
    until "$@"; do
        if (( n >= tries )); then
            return 1
        fi
        warn "$what failed (attempt $n of $tries); trying again in $((5 * n)) s"
        sleep $((5 * n))
        n=$((n + 1))
    done
}

# Non-interactive (CI has no stdin); waits up to 3 minutes for dpkg's lock, retries downloads.
APT_OPTS=(-qq -o DPkg::Lock::Timeout=180 -o Acquire::Retries=3)
apt_updated=0
apt_install() {
    # `apt-get update` once per run.
    if [[ $apt_updated -eq 0 ]]; then
        retry 3 "apt-get update" env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" update >/dev/null \
            || return 1
        apt_updated=1
    fi
    retry 3 "apt-get install $*" env DEBIAN_FRONTEND=noninteractive apt-get "${APT_OPTS[@]}" install -y "$@" >/dev/null
}

# -- 1. Python and the virtual environment --------------------------------------------

python_ok() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }

find_python() {
    local candidate
    for candidate in "${PYTHON:-}" python3 python3.13 python3.12 python3.11; do
        [[ -n "$candidate" ]] || continue
        if command -v "$candidate" >/dev/null 2>&1 && python_ok "$candidate"; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

step "Python virtual environment (.venv)"
if [[ -x "$VENV/bin/python" ]] && python_ok "$VENV/bin/python"; then
    ok "using existing $VENV ($("$VENV/bin/python" --version 2>&1))"
else
    PY="$(find_python)" || die "Python 3.11 or newer is required and was not found.
    Install it (Debian/Ubuntu: apt-get install python3 python3-venv) or set PYTHON=/path/to/python3.11."
    rm -rf "$VENV"
    if ! "$PY" -m venv "$VENV" 2>/dev/null; then
        # Debian ships venv's ensurepip in a separate package.
        rm -rf "$VENV"
        pyver="$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
        if is_root && command -v apt-get >/dev/null 2>&1; then
            warn "$PY cannot create a venv; installing python${pyver}-venv with apt-get"
            apt_install "python${pyver}-venv" || apt_install python3-venv \
                || die "apt-get could not install python${pyver}-venv"
            "$PY" -m venv "$VENV" || die "$PY -m venv $VENV failed"
        else
            die "$PY cannot create a virtual environment. Install python${pyver}-venv
    (Debian/Ubuntu: sudo apt-get install python${pyver}-venv) and run this again."
        fi
    fi
    ok "created $VENV with $("$VENV/bin/python" --version 2>&1) from $PY"
fi
VPY="$VENV/bin/python"

# -- 2. eoslog and its Python dependencies --------------------------------------------

step "Python packages (pip install -e '.[$EXTRAS]')"
pip_quiet() {
    # pip -q still repeats, for every package, a warning about a configured package
    # directory that does not exist (machine-wide pip config); drop only that line.
    { "$VPY" -m pip -q "$@" 2>&1 1>&3 \
        | { grep -v -E "^WARNING: Location '[^']*' is ignored: it is neither a file nor a directory" \
            || true; } >&2; } 3>&1
}
want_stamp="$( (cat "$ROOT/pyproject.toml"; echo "$EXTRAS"; "$VPY" --version) | sha256sum | cut -d' ' -f1)"
if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$want_stamp" ]] \
        && "$VPY" -c 'import eoslog' 2>/dev/null; then
    ok "already installed (pyproject.toml unchanged)"
else
    export PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_PROGRESS_BAR=off
    # -q keeps pip to warnings and errors; errors are printed in full.
    export PIP_RETRIES=10 PIP_TIMEOUT=60
    retry 3 "pip install --upgrade pip" pip_quiet install --upgrade pip \
        || die "could not upgrade pip in $VENV (is PyPI reachable?)"
    retry 3 "pip install -e .[$EXTRAS]" pip_quiet install -e "$ROOT[$EXTRAS]" \
        || die "pip could not install eoslog with its '$EXTRAS' extras; the error is above"
    echo "$want_stamp" > "$STAMP"
    ok "installed eoslog $("$VPY" -c 'import importlib.metadata as m; print(m.version("eoslog"))')" \
       "and its dependencies"
fi

# The optional C record decoder (issue 17), built in place next to its source for the
# editable install; without a compiler eoslog runs its pure-Python decoder, but the tests of
# both decoders need it, so a missing compiler is installed (root) or reported.
step "C record decoder (scripts/build_speedups.py)"
build_speedups() {
    command -v cc >/dev/null 2>&1 && "$VPY" "$ROOT/scripts/build_speedups.py" >/dev/null 2>&1 \
        && "$VPY" -c 'import eoslog.records._speedups' 2>/dev/null
}
if ! build_speedups && [[ "${EOSLOG_SKIP_SYSTEM_DEPS:-0}" != "1" ]] && is_root \
        && command -v apt-get >/dev/null 2>&1; then
    # A compiler, and Python's headers (Debian's python3.X-dev; pyenv and python.org builds have them).
    vpyver="$("$VPY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    apt_install gcc || warn "apt-get could not install gcc"
    "$VPY" -c 'import sysconfig, os, sys; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
        || apt_install "python${vpyver}-dev" || apt_install python3-dev || warn "apt-get could not install Python's headers"
fi
if build_speedups; then
    ok "built"
else
    missing_dep "a C compiler and Python's headers for eoslog's optional C record decoder" \
        "apt-get install -y gcc python3-dev, then: python scripts/build_speedups.py (eoslog runs without it, slower)"
fi

if [[ "${EOSLOG_SKIP_SYSTEM_DEPS:-0}" == "1" ]]; then
    step "System packages: skipped (EOSLOG_SKIP_SYSTEM_DEPS=1)"
    exit 0
fi

# -- 3. kcat ------------------------------------------------------------------------------

# A command from a Debian package: report it; when missing, install it as root, else report it.
ensure_command() {  # command, package, its version command, how to install it without root
    local cmd="$1" pkg="$2" version="$3" hint="$4"
    if command -v "$cmd" >/dev/null 2>&1; then
        ok "$(command -v "$cmd") ($($version 2>/dev/null | head -n1))"
    elif is_root && command -v apt-get >/dev/null 2>&1; then
        echo "    $cmd is missing; installing it: apt-get update && apt-get install -y $pkg"
        if apt_install "$pkg" && command -v "$cmd" >/dev/null 2>&1; then
            ok "installed $(command -v "$cmd")"
        else
            missing_dep "$cmd (apt-get could not install it)" \
                "Install it by hand: apt-get update && apt-get install -y $pkg"
        fi
    else
        missing_dep "$cmd (not on PATH; not installed here: no root shell or no apt-get)" "$hint"
    fi
}

step "kcat (Kafka command-line client, used by the interop tests)"
ensure_command kcat kcat "kcat -V" \
    "Install it with: sudo apt-get update && sudo apt-get install -y kcat (macOS: brew install kcat)"

# -- 4. Java 17 ---------------------------------------------------------------------------

step "Java 17 or newer (for Spark: the eoslog.spark connector and the payments pipeline)"
java_cmd() {
    # The java Spark's launcher uses: $JAVA_HOME/bin/java, else java on PATH.
    if [[ -n "${JAVA_HOME:-}" ]]; then
        echo "$JAVA_HOME/bin/java"
    else
        command -v java || echo java
    fi
}
java_major() {
    # `java -version` prints e.g. 'openjdk version "17.0.15" 2025-04-15' (or "1.8.0_..." for 8).
    "$(java_cmd)" -version 2>&1 | sed -n 's/.*version "\([0-9][0-9.]*\).*/\1/p' | head -n1 \
        | awk -F. '{ print ($1 == 1) ? $2 : $1 }'
}
java_ok() {
    local jv
    jv="$(java_major 2>/dev/null || true)"
    [[ -n "$jv" && "$jv" -ge 17 ]]
}
java_problem=""
if java_ok; then
    ok "$(java_cmd) ($("$(java_cmd)" -version 2>&1 | head -n1))"
elif is_root && command -v apt-get >/dev/null 2>&1 && [[ -z "${JAVA_HOME:-}" ]]; then
    echo "    Java 17 is missing; installing it: apt-get update && apt-get install -y openjdk-17-jre-headless"
    if apt_install openjdk-17-jre-headless && java_ok; then
        ok "installed $(java_cmd) ($("$(java_cmd)" -version 2>&1 | head -n1))"
    else
        java_problem="apt-get could not install openjdk-17-jre-headless; install Java 17 by hand"
    fi
elif [[ -x "$(java_cmd)" ]] || command -v "$(java_cmd)" >/dev/null 2>&1; then
    java_problem="$(java_cmd) is Java $(java_major 2>/dev/null || echo '(unknown version)'); Spark needs 17 or newer.
    Install it with: sudo apt-get install -y openjdk-17-jre-headless (macOS: brew install openjdk@17),
    or point JAVA_HOME at a Java 17"
else
    java_problem="no Java found ($(if [[ -n "${JAVA_HOME:-}" ]]; then echo "JAVA_HOME=$JAVA_HOME has no bin/java"; else echo "java is not on PATH"; fi)); Spark needs Java 17 or newer.
    Install it with: sudo apt-get install -y openjdk-17-jre-headless (macOS: brew install openjdk@17),
    or point JAVA_HOME at a Java 17"
fi
if [[ -n "$java_problem" ]]; then
    missing_dep "Java 17 or newer: $java_problem" \
        "Without it the Spark tests fail and the main job cannot run." "${EOSLOG_REQUIRE_JAVA:-0}"
fi

# -- ZooKeeper (cluster mode: `eoslog cluster up` and tests/cluster) -------------------------

step "ZooKeeper (Debian's zookeeper package, for cluster mode and the cluster tests)"
zk_jar=/usr/share/java/zookeeper.jar
if [[ -n "${EOSLOG_ZOOKEEPER_CLASSPATH:-}" ]]; then
    ok "using EOSLOG_ZOOKEEPER_CLASSPATH=$EOSLOG_ZOOKEEPER_CLASSPATH"
elif [[ -f "$zk_jar" ]]; then
    ok "$zk_jar ($(dpkg-query -W -f='${Version}' zookeeper 2>/dev/null || echo 'version unknown'))"
elif is_root && command -v apt-get >/dev/null 2>&1; then
    echo "    ZooKeeper is missing; installing it: apt-get update && apt-get install -y zookeeper"
    if apt_install zookeeper && [[ -f "$zk_jar" ]]; then
        ok "installed $zk_jar"
    else
        missing_dep "ZooKeeper (apt-get could not install the zookeeper package)" \
            "Install it by hand: apt-get update && apt-get install -y zookeeper"
    fi
else
    missing_dep "ZooKeeper ($zk_jar not found; not installed here: no root shell or no apt-get)" \
        "Install it with: sudo apt-get update && sudo apt-get install -y zookeeper,
    or set EOSLOG_ZOOKEEPER_CLASSPATH to the classpath of a ZooKeeper 3.5+ server."
fi

# -- 5b. Chromium (issue 16): the console tests drive Debian's chromium with Playwright ------

step "Chromium (headless browser for the console tests, tests/observability)"
ensure_command chromium chromium "chromium --version" \
    "Install it with: sudo apt-get update && sudo apt-get install -y chromium, or set EOSLOG_CHROMIUM"

# -- 5c. FUSE 3 (issue 14: the power-cut tests run the broker on tests/support/cutfs.py) ---------------

step "FUSE 3 (libfuse3 + fusermount3, for the power-cut file system of tests/chaos/test_power_cut.py)"
fuse_ok() { [[ -e /dev/fuse ]] && command -v fusermount3 >/dev/null 2>&1 && ldconfig -p 2>/dev/null | grep -q libfuse3; }
if fuse_ok; then
    ok "fusermount3 $(fusermount3 -V 2>/dev/null | awk '{print $NF}'), /dev/fuse"
elif [[ ! -e /dev/fuse ]]; then
    missing_dep "FUSE (/dev/fuse does not exist: no FUSE in this kernel or container)" \
        "Load the module (modprobe fuse) or give the container /dev/fuse (docker run --device /dev/fuse --cap-add SYS_ADMIN)."
elif is_root && command -v apt-get >/dev/null 2>&1; then
    echo "    FUSE 3 is missing; installing it: apt-get update && apt-get install -y fuse3"
    if apt_install fuse3 && fuse_ok; then
        ok "installed fuse3"
    else
        missing_dep "FUSE 3 (apt-get could not install fuse3)" "Install it by hand: apt-get install -y fuse3"
    fi
else
    missing_dep "FUSE 3 (fusermount3 / libfuse3 not found; no root shell or no apt-get here)" \
        "Install it with: sudo apt-get update && sudo apt-get install -y fuse3"
fi

# -- 6. Reference implementations (issue 12): Apache Kafka and Spark's Kafka connector ------
# reference/pom.xml names them; Maven copies them with their transitive jars into .reference/lib/
# (kafka/, spark-kafka/; ignored by git), once: the copy is stamped with the poms' hash and redone
# only when a pom changes. Needs Java (section 4) and Maven (apt-get install maven when root).

step "Reference jars: Apache Kafka and Spark's Kafka connector (reference/pom.xml -> .reference/lib)"
# Kafka Streams tests run a Java source file directly (java File.java), which needs a JDK's compiler.
if [[ -z "$java_problem" ]] && ! command -v javac >/dev/null 2>&1; then
    if is_root && command -v apt-get >/dev/null 2>&1; then
        echo "    javac is missing; installing it: apt-get install -y openjdk-17-jdk-headless"
        apt_install openjdk-17-jdk-headless || true
    fi
    command -v javac >/dev/null 2>&1 || missing_dep "a JDK (javac)" \
        "Install it with: sudo apt-get install -y openjdk-17-jdk-headless (the Kafka Streams tests compile Java)"
fi
REF_LIB="$ROOT/.reference/lib"
mvn_copy_reference() {  # LOG: Maven's output of this attempt
    mvn -B -q -Dmaven.wagon.http.retryHandler.count=3 -f "$ROOT/reference/pom.xml" \
        dependency:copy-dependencies -Dreference.lib="$REF_LIB" >"$1" 2>&1 \
        || { tail -n 30 "$1" >&2; return 1; }
}
REF_STAMP="$REF_LIB/.pom-sha256"
ref_hash="$(cat "$ROOT"/reference/pom.xml "$ROOT"/reference/*/pom.xml | sha256sum | cut -d' ' -f1)"
ref_problem=""
if [[ -f "$REF_STAMP" && "$(cat "$REF_STAMP")" == "$ref_hash" ]]; then
    ok "already resolved ($(find "$REF_LIB" -name '*.jar' | wc -l) jars; reference poms unchanged)"
elif [[ -n "$java_problem" ]]; then
    ref_problem="Java 17 is missing (above); Maven needs it to resolve reference/pom.xml"
else
    if ! command -v mvn >/dev/null 2>&1; then
        if is_root && command -v apt-get >/dev/null 2>&1; then
            echo "    Maven is missing; installing it: apt-get update && apt-get install -y maven"
            apt_install maven || true
        fi
    fi
    if ! command -v mvn >/dev/null 2>&1; then
        ref_problem="Maven (mvn) is not on PATH. Install it with: sudo apt-get install -y maven
    (macOS: brew install maven), then run scripts/setup.sh again"
    else
        echo "    resolving with $(mvn -v 2>/dev/null | head -n1 | sed 's/\x1b\[[0-9;]*m//g')" \
             "(the first time downloads about 200 MB from Maven Central)"
        rm -rf "$REF_LIB"
        mkdir -p "$REF_LIB"
        ref_log="$(mktemp)"
        if retry 3 "mvn dependency:copy-dependencies" mvn_copy_reference "$ref_log"; then
            echo "$ref_hash" > "$REF_STAMP"
            ok "copied $(find "$REF_LIB/kafka" -name '*.jar' | wc -l) jars to .reference/lib/kafka," \
               "$(find "$REF_LIB/spark-kafka" -name '*.jar' | wc -l) to .reference/lib/spark-kafka"
        else
            ref_problem="mvn dependency:copy-dependencies failed (its output is above); is Maven Central reachable?"
        fi
        rm -f "$ref_log"
    fi
fi
if [[ -n "$ref_problem" ]]; then
    missing_dep "the reference jars (Apache Kafka, Spark's Kafka connector): $ref_problem" \
        "Without them the conformance and Java-ecosystem tests (tests/conformance, ...) fail."
fi
