#pragma once
// WiredTiger settings for a store that serves as the fast tier, passed as
// mongod's --wiredTigerEngineConfigString (docs/OPERATIONS.md, Prerequisites,
// "The fast tier's dirty-data thresholds"). The fast tier is written to as fast as it is read
// (every promotion and warm-up copy is a write), and its cache holds its whole data: with
// WiredTiger's default dirty target (5% of the cache) the eviction server writes the same hot pages
// back again and again between checkpoints, a third of the store's CPU in a cold start
// (docs/BENCHMARKS.md, 2026-12-07 (late)). Letting dirty data reach 30% before eviction writes it
// (checkpoints, every 60 s, write it anyway) removes that work; application threads help evict only
// past 60%.
namespace halo {

inline constexpr const char* kFastTierEngineConfig =
    "eviction_dirty_target=30,eviction_dirty_trigger=60";

}  // namespace halo
