#include "store/exec/profile_settings.h"

namespace halo::store {

ProfileSettings::Snapshot ProfileSettings::get(const std::string& db) const {
    std::lock_guard lk(mu_);
    Snapshot s;
    auto it = dbs_.find(db);
    if (it != dbs_.end()) {
        s.db.level = it->second.level;
        s.db.filter = it->second.filter;
        s.db.filterSpec = it->second.filterSpec.copy();
    }
    s.slowMs = slowMs_;
    s.sampleRate = sampleRate_;
    return s;
}

void ProfileSettings::setServerDefaults(int slowMs, double sampleRate) {
    std::lock_guard lk(mu_);
    slowMs_ = slowMs;
    slowMsNow_ = slowMs;
    sampleRate_ = sampleRate;
}

ProfileSettings::Snapshot ProfileSettings::update(
    const std::string& db, std::optional<int> level, std::optional<int> slowMs,
    std::optional<double> sampleRate,
    std::optional<std::pair<std::shared_ptr<const query::Matcher>, bson::Doc>> filter) {
    std::lock_guard lk(mu_);
    Snapshot before;
    Database& d = dbs_[db];
    before.db.level = d.level;
    before.db.filter = d.filter;
    before.db.filterSpec = d.filterSpec.copy();
    before.slowMs = slowMs_;
    before.sampleRate = sampleRate_;
    const bool watched = d.level > 0 || d.filter;
    if (level) d.level = *level;
    if (filter) {
        d.filter = std::move(filter->first);
        d.filterSpec = std::move(filter->second);
    }
    if (const bool now = d.level > 0 || d.filter; now != watched) watchedDatabases_ += now ? 1 : -1;
    if (slowMs) {
        slowMs_ = *slowMs;
        slowMsNow_ = *slowMs;
    }
    if (sampleRate) sampleRate_ = *sampleRate;
    return before;
}

}  // namespace halo::store
