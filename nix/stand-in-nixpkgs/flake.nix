# A STAND-IN for nixpkgs, for CI machines that cannot fetch nixpkgs. It is not nixpkgs and builds nothing
# real: it provides only the attributes ../../flake.nix uses, asserts what the real functions would need
# (files that exist, required arguments), and returns placeholder derivations, so that the project's flake
# outputs can be evaluated offline with
#   nix eval .#<output> --override-input nixpkgs path:./nix/stand-in-nixpkgs
{
  description = "offline stand-in for nixpkgs (structure checks only; not nixpkgs)";

  outputs = { self }:
    let
      systems = [ "x86_64-linux" "aarch64-linux" ];
      genAttrs = names: f: builtins.listToAttrs (map (name: { inherit name; value = f name; }) names);
      placeholder = system: name: derivation {
        inherit name system;
        builder = "/bin/sh";
        args = [ "-c" "echo stand-in > $out" ];
      };
      requireAll = names: args:
        builtins.all (n: builtins.hasAttr n args || throw "stand-in: missing argument ${n}") names;
      lib = {
        inherit genAttrs;
        fileset = {
          unions = list:
            assert builtins.all builtins.pathExists list || throw "stand-in: a fileset member does not exist";
            list;
          toSource = { root, fileset }: root;
        };
      };
      packagesFor = system: {
        inherit lib;
        stdenv.hostPlatform.system = system;
        pkg-config = placeholder system "pkg-config-stand-in";
        zlib = placeholder system "zlib-stand-in";
        clippy = placeholder system "clippy-stand-in";
        rustfmt = placeholder system "rustfmt-stand-in";
        minisign = placeholder system "minisign-stand-in";
        python3 = placeholder system "python3-stand-in";
        rustPlatform.buildRustPackage = args:
          assert requireAll [ "pname" "version" "src" "cargoLock" "meta" ] args;
          assert builtins.pathExists args.cargoLock.lockFile || throw "stand-in: cargoLock.lockFile missing";
          assert builtins.pathExists (args.src + "/Cargo.toml") || throw "stand-in: src has no Cargo.toml";
          assert builtins.pathExists (args.src + "/crates/scifact-audit/Cargo.toml") || throw "stand-in: src has no scifact-audit";
          assert builtins.isString args.SCIFACT_AUDIT_BUILD_REVISION;
          (placeholder system "${args.pname}-${args.version}-stand-in") // {
            inherit (args) pname version meta cargoBuildFlags SCIFACT_AUDIT_BUILD_REVISION;
            standIn = true;
          };
        writeShellScriptBin = name: text:
          assert builtins.isString text;
          placeholder system name;
        mkShell = args: (placeholder system "dev-shell-stand-in") // { inherit (args) packages; };
      };
    in
    {
      inherit lib;
      legacyPackages = genAttrs systems packagesFor;
    };
}
