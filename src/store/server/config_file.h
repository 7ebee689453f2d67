#pragma once
// The store's mongod-style YAML configuration file (`halocline store --config`)
// and its server parameters (--setParameter, YAML setParameter). Parsing only:
// no files are opened beyond the configuration itself, nothing is started.
#include <functional>
#include <string>
#include <string_view>

#include "store/server/options.h"

namespace halo::store {

/// Applies one server parameter (--setParameter name=value, YAML setParameter).
/// Empty when applied, else the error.
std::string setParameter(StoreOptions& o, const std::string& name, const std::string& value);

/// Whether the command line gave a flag ("--port"): flags win over the file.
using FlagGiven = std::function<bool(std::string_view flag)>;

/// Applies a mongod-style YAML configuration (storage.dbPath, net.port,
/// net.bindIp, storage.wiredTiger.engineConfig.cacheSizeGB, ...) to `o`, except
/// the settings whose flag `given` reports. False with `*err` set on any error
/// (bad YAML, an unknown section, a value of the wrong type); never throws.
bool applyConfigText(std::string_view yamlText, StoreOptions& o, const FlagGiven& given,
                     std::string* err);
/// The same for a file.
bool applyConfigFile(const std::string& path, StoreOptions& o, const FlagGiven& given,
                     std::string* err);

}  // namespace halo::store
