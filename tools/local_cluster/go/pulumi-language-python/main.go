// A stand-in for Pulumi's Python language host, for the local cluster's engine: the proxy serves Pulumi's CLI
// and SDK modules but not the host's (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3: 403).
// It runs a Python program as the host of the same Pulumi release does (sdk/python/cmd/pulumi-language-python,
// main.go: Run, constructArguments, constructConfig, parseOptions): the release's own executor script
// (pulumi-language-python-exec, copied beside this binary from the sdk/v3 module) in the program's virtualenv,
// resolved by the release's own toolchain package, with the same arguments and environment. What it leaves out
// (code generation, packing, plugins written in Python other than policy packs, type checkers, debugging, dependency
// installation: `make` installs the venv) answers Unimplemented or nothing.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/pulumi/pulumi/sdk/v3"
	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/rpcutil"
	pulumirpc "github.com/pulumi/pulumi/sdk/v3/proto/go"
	"github.com/pulumi/pulumi/sdk/v3/python/toolchain"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
)

var version = "v0.0.0"

type host struct {
	pulumirpc.UnimplementedLanguageRuntimeServer
	exec   string
	engine string
	cancel context.Context
	stop   context.CancelFunc
}

func options(info *pulumirpc.ProgramInfo) (toolchain.PythonOptions, error) {
	opts := toolchain.PythonOptions{Root: info.RootDirectory, ProgramDir: info.ProgramDirectory}
	given := info.Options.AsMap()
	if v, ok := given["virtualenv"]; ok {
		s, ok := v.(string)
		if !ok {
			return opts, errors.New("virtualenv option must be a string")
		}
		opts.Virtualenv = s
	}
	if v, ok := given["toolchain"]; ok && v != "pip" {
		return opts, fmt.Errorf("the local engine's language host runs the pip toolchain only, not %v", v)
	}
	if _, ok := given["typechecker"]; ok {
		return opts, errors.New("the local engine's language host runs no typechecker")
	}
	return opts, nil
}

func arguments(h *host, req *pulumirpc.RunRequest) []string {
	var args []string
	add := func(k, v string) {
		if v != "" {
			args = append(args, "--"+k, v)
		}
	}
	add("monitor", req.GetMonitorAddress())
	add("engine", h.engine)
	add("project", req.GetProject())
	add("root_directory", req.GetInfo().RootDirectory)
	add("stack", req.GetStack())
	add("pwd", req.GetPwd())
	add("dry_run", strconv.FormatBool(req.GetDryRun()))
	add("parallel", strconv.Itoa(int(req.GetParallel())))
	add("organization", req.GetOrganization())
	args = append(args, req.Info.EntryPoint)
	return append(args, req.GetArgs()...)
}

func (h *host) Run(ctx context.Context, req *pulumirpc.RunRequest) (*pulumirpc.RunResponse, error) {
	opts, err := options(req.Info)
	if err != nil {
		return nil, err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return nil, err
	}
	if err := tc.ValidateVenv(ctx); err != nil {
		return nil, err
	}
	runCtx, cancel := context.WithCancel(h.cancel)
	context.AfterFunc(ctx, cancel)
	cmd, err := tc.Command(runCtx, append([]string{h.exec}, arguments(h, req)...)...)
	if err != nil {
		return nil, err
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	config, err := json.Marshal(req.GetConfig())
	if err != nil {
		return nil, err
	}
	secrets := req.GetConfigSecretKeys()
	if secrets == nil {
		secrets = []string{}
	}
	keys, err := json.Marshal(secrets)
	if err != nil {
		return nil, err
	}
	cmd.Env = append(env, "PULUMI_CONFIG="+string(config), "PULUMI_CONFIG_SECRET_KEYS="+string(keys))
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			if exit.ExitCode() == 32 { // the executor showed the user an actionable message
				return &pulumirpc.RunResponse{Bail: true}, nil
			}
			return &pulumirpc.RunResponse{Error: fmt.Sprintf("program exited with non-zero exit code: %d", exit.ExitCode())}, nil
		}
		return &pulumirpc.RunResponse{Error: fmt.Sprintf("problem executing program (could not run language executor): %v", err)}, nil
	}
	return &pulumirpc.RunResponse{}, nil
}

// RunPlugin runs a policy pack, as the release's host does (main.go RunPlugin, its analyzer branch): `python -u -m
// pulumi.policy <args> <the pack's folder>` in the pack's virtualenv, from the pack's folder, with the stack's
// configuration the engine gives the pack (sdk.PolicyProxy, the release's own) in its environment. No other kind of
// Python plugin.
func (h *host) RunPlugin(req *pulumirpc.RunPluginRequest, server pulumirpc.LanguageRuntime_RunPluginServer) error {
	if req.Kind != string(apitype.AnalyzerPlugin) {
		return status.Errorf(codes.Unimplemented, "the local engine's language host runs policy packs only, not %q plugins", req.Kind)
	}
	ctx := server.Context()
	opts, err := options(req.Info)
	if err != nil {
		return err
	}
	tc, err := toolchain.ResolveToolchain(opts)
	if err != nil {
		return err
	}
	args := append(append([]string{"-u", "-m", "pulumi.policy"}, req.Args...), req.Info.ProgramDirectory)
	cmd, err := tc.Command(ctx, args...)
	if err != nil {
		return err
	}
	closer, stdout, stderr, err := rpcutil.MakeRunPluginStreams(server, false)
	if err != nil {
		return err
	}
	defer closer.Close()
	cmd.Dir = req.Info.ProgramDirectory
	proxy, stdout, err := sdk.NewPolicyProxy(ctx, stdout)
	if err != nil {
		return fmt.Errorf("could not start policy pack proxy: %w", err)
	}
	config, err := proxy.AwaitConfiguration(ctx)
	if err != nil {
		return fmt.Errorf("could not get stack configuration: %w", err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	if config != nil {
		given := func(k, v string) {
			if v != "" {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
		}
		given("PULUMI_ORGANIZATION", config.Organization)
		given("PULUMI_PROJECT", config.Project)
		given("PULUMI_STACK", config.Stack)
		given("PULUMI_DRY_RUN", strconv.FormatBool(config.DryRun))
		if config.Config != nil {
			configJSON, err := json.Marshal(config.Config)
			if err != nil {
				return fmt.Errorf("could not marshal stack configuration: %w", err)
			}
			given("PULUMI_CONFIG", string(configJSON))
		}
	}
	cmd.Env = append(cmd.Env, req.Env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("problem executing plugin program (could not run language executor): %w", err)
	}
	if err := proxy.Attach(ctx, cmd); err != nil {
		return fmt.Errorf("could not attach policy pack proxy: %w", err)
	}
	return closer.Close()
}

func (h *host) GetRequiredPackages(context.Context, *pulumirpc.GetRequiredPackagesRequest) (*pulumirpc.GetRequiredPackagesResponse, error) {
	// Providers load on first use from the plugin cache, where the local engine installs them.
	return &pulumirpc.GetRequiredPackagesResponse{}, nil
}

func (h *host) GetRequiredPlugins(context.Context, *pulumirpc.GetRequiredPluginsRequest) (*pulumirpc.GetRequiredPluginsResponse, error) {
	return &pulumirpc.GetRequiredPluginsResponse{}, nil
}

func (h *host) GetPluginInfo(context.Context, *emptypb.Empty) (*pulumirpc.PluginInfo, error) {
	return &pulumirpc.PluginInfo{Version: version}, nil
}

func (h *host) InstallDependencies(*pulumirpc.InstallDependenciesRequest, pulumirpc.LanguageRuntime_InstallDependenciesServer) error {
	return nil // `make` installs the program's venv before any pulumi command
}

func (h *host) GetProgramDependencies(context.Context, *pulumirpc.GetProgramDependenciesRequest) (*pulumirpc.GetProgramDependenciesResponse, error) {
	return &pulumirpc.GetProgramDependenciesResponse{}, nil
}

func (h *host) About(context.Context, *pulumirpc.AboutRequest) (*pulumirpc.AboutResponse, error) {
	return &pulumirpc.AboutResponse{}, nil
}

func (h *host) Handshake(ctx context.Context, req *pulumirpc.LanguageHandshakeRequest) (*pulumirpc.LanguageHandshakeResponse, error) {
	h.engine = req.EngineAddress
	return &pulumirpc.LanguageHandshakeResponse{}, nil
}

func (h *host) Cancel(context.Context, *emptypb.Empty) (*emptypb.Empty, error) {
	h.stop()
	return &emptypb.Empty{}, nil
}

func main() {
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.String("tracing", "", "ignored")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := context.WithCancel(context.Background())
	h := &host{exec: filepath.Join(filepath.Dir(self), "pulumi-language-python-exec"), cancel: ctx, stop: stop}
	if args := flag.Args(); len(args) > 0 {
		h.engine = args[0]
	}
	done := make(chan bool)
	handle, err := rpcutil.ServeWithOptions(rpcutil.ServeOptions{
		Cancel: done,
		Init: func(srv *grpc.Server) error {
			pulumirpc.RegisterLanguageRuntimeServer(srv, h)
			return nil
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("%d\n", handle.Port)
	if err := <-handle.Done; err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
