{
  description = "scifact-audit: a receipt-bearing retrieval evaluation on BEIR SciFact";

  # nixos-unstable at 2026-05-31: rustc 1.95, which sysinfo 0.40 needs (see ../shared/notes).
  inputs.nixpkgs.url = "github:NixOS/nixpkgs/331800de5053fcebacf6813adb5db9c9dca22a0c";

  outputs = { self, nixpkgs }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: nixpkgs.lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});
      # Embedded in the binary and recorded in every aggregate as the build revision.
      revision = self.rev or (if self ? dirtyRev then self.dirtyRev else "nix-unknown-revision");
      package = pkgs:
        pkgs.rustPlatform.buildRustPackage {
          pname = "scifact-audit";
          version = "0.1.0";
          src = pkgs.lib.fileset.toSource {
            root = ./.;
            fileset = pkgs.lib.fileset.unions [ ./Cargo.toml ./Cargo.lock ./flake.lock ./crates ./configs ./fixtures ./rustfmt.toml ./clippy.toml ];
          };
          cargoLock.lockFile = ./Cargo.lock;
          # Bundled SQLite, vendored libgit2 and usearch's C++ compile with stdenv's cc/c++; zlib for libz-sys.
          nativeBuildInputs = [ pkgs.pkg-config ];
          buildInputs = [ pkgs.zlib ];
          cargoBuildFlags = [ "-p" "scifact-audit" ];
          cargoTestFlags = [ "--workspace" ];
          SCIFACT_AUDIT_BUILD_REVISION = revision;
          # After the tests, the built binary runs the whole evaluation on the committed tiny corpus in the
          # sandbox (offline, seconds) and must find it identical, run by run and bit by bit, to the expected
          # bundle: a hermetic build is also an end-to-end check.
          postCheck = ''
            bin=$(find target -path '*/release/scifact-audit' -type f | head -n 1)
            "$bin" keygen --secret-key "$TMPDIR/tiny.key" --public-key "$TMPDIR/tiny.pub" --without-password
            "$bin" eval --profile tiny --work-dir "$TMPDIR/tiny" --archive fixtures/tiny/scifact-tiny.zip \
              --model-dir fixtures/tiny/model --search-space fixtures/tiny/baseline-only.json \
              --secret-key "$TMPDIR/tiny.key"
            "$bin" compare --baseline fixtures/tiny/expected --public-key fixtures/tiny/expected.pub \
              --candidate "$TMPDIR"/tiny/bundles/* --candidate-public-key "$TMPDIR/tiny.pub" \
              --archive fixtures/tiny/scifact-tiny.zip --out "$TMPDIR/tiny-compare"
            grep -q '"verdict": "identical"' "$TMPDIR/tiny-compare/comparison.json"
            ! grep -Eq '"verdict": "(improved|non_inferior|inconclusive|regressed)"' "$TMPDIR/tiny-compare/comparison.json"
          '';
          preBuild = ''
            export RUSTFLAGS="''${RUSTFLAGS:+$RUSTFLAGS }--remap-path-prefix=$NIX_BUILD_TOP=/build"
            export NIX_CFLAGS_COMPILE="''${NIX_CFLAGS_COMPILE:-} -ffile-prefix-map=$NIX_BUILD_TOP=/build"
          '';
          meta = {
            description = "Receipt-bearing retrieval evaluation on BEIR SciFact";
            mainProgram = "scifact-audit";
          };
        };
    in
    {
      packages = forAllSystems (pkgs: rec {
        scifact-audit = package pkgs;
        default = scifact-audit;
      });

      apps = forAllSystems (pkgs:
        let
          tool = self.packages.${pkgs.stdenv.hostPlatform.system}.default;
          # A third party's entry point: one subcommand, no checkout needed (`nix run <flake>#verify-bundle -- ...`).
          subcommand = name: description: {
            type = "app";
            program = "${pkgs.writeShellScriptBin "scifact-audit-${name}" ''exec ${tool}/bin/scifact-audit ${name} "$@"''}/bin/scifact-audit-${name}";
            meta.description = description;
          };
        in
        {
          default = {
            type = "app";
            program = "${tool}/bin/scifact-audit";
            meta.description = "Run `nix run . -- eval --work-dir DIR` for the whole evaluation";
          };
          verify-bundle = subcommand "verify-bundle"
            "Verify a bundle offline: `nix run <flake>#verify-bundle -- --bundle-dir B --public-key K`";
          reproduce = subcommand "reproduce"
            "Re-execute a bundle and state whether it reproduces: `nix run <flake>#reproduce -- --bundle-dir B --public-key K --work-dir W`";
          verify-reproduction = subcommand "verify-reproduction"
            "Check a reproduction statement: `nix run <flake>#verify-reproduction -- --bundle-dir B --statement S --public-key K`";
        });

      # The package's checkPhase runs `cargo test --workspace` (the README's test command), then the tiny
      # evaluation against fixtures/tiny/expected (postCheck).
      checks = forAllSystems (pkgs: {
        build = self.packages.${pkgs.stdenv.hostPlatform.system}.default;
      });

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          inputsFrom = [ self.packages.${pkgs.stdenv.hostPlatform.system}.default ];
          packages = [ pkgs.clippy pkgs.rustfmt pkgs.minisign pkgs.python3 ];
        };
      });
    };
}
