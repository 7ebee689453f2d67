#pragma once
// The `halocline bench` subcommands: load, run, ramp, report, reproduce. main()
// registers them, parses, and hands over when `bench` was chosen:
//
//     auto bench = halo::bench::BenchCommand::add(app);
//     CLI11_PARSE(app, argc, argv);
//     if (bench->parsed()) return bench->run();
//
// The object owns the storage the parsed flags land in; keep it alive until run().
#include <memory>

namespace CLI {
class App;
}

namespace halo::bench {

class BenchCommand {
  public:
    static std::unique_ptr<BenchCommand> add(CLI::App& app);
    ~BenchCommand();
    bool parsed() const;
    /// Runs the chosen subcommand; returns the process exit status.
    int run();

  private:
    struct Flags;
    BenchCommand();
    std::unique_ptr<Flags> f_;
};

}  // namespace halo::bench
