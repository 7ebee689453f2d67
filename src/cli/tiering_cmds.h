#pragma once
// `halocline proxy` and `halocline up`: the subcommands of the tiering system.
#include <CLI/CLI.hpp>

namespace halo::cli {

struct TieringCommands {
    CLI::App* proxy = nullptr;
    CLI::App* up = nullptr;
    std::string config;
    int port = -1;
    std::string dataDir = "./data";
    int upPort = 27017;
    std::string horizon = "30d";
    std::string demoNs = "shop.orders";
    std::string ageField = "date";
};

/// Registers the subcommands on `app`; `t` receives the parsed options.
void addTieringCommands(CLI::App& app, TieringCommands& t);
/// Runs whichever of them was parsed. Returns the exit code, or -1 if neither.
int runTieringCommands(TieringCommands& t, const char* argv0);

}  // namespace halo::cli
