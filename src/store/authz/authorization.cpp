#include "store/authz/authorization.h"

#include <algorithm>

#include "bson/doc.h"
#include "store/authz/role_graph.h"

namespace halo::store::authz {

namespace {

using A = ActionType;
using RP = ResourcePattern;

/// Builds a rule as alternatives (each a conjunction of needs).
class Rule {
  public:
    Rule() : alts_(1) {}
    void need(const RP& r, const ActionSet& a) {
        for (auto& alt : alts_) alt.needs.push_back({r, a});
    }
    /// One of `options` (each a conjunction) on top of what is already needed.
    void needOneOf(const std::vector<std::vector<Need>>& options) {
        std::vector<Alternative> out;
        for (const auto& alt : alts_)
            for (const auto& opt : options) {
                Alternative a = alt;
                a.needs.insert(a.needs.end(), opt.begin(), opt.end());
                out.push_back(std::move(a));
            }
        alts_ = std::move(out);
    }
    void replace(std::vector<Alternative> alts) { alts_ = std::move(alts); }
    std::vector<Alternative> done() && {
        for (const auto& a : alts_)
            if (a.needs.empty() && a.without.empty()) return {};
        return std::move(alts_);
    }

  private:
    std::vector<Alternative> alts_;
};

std::string firstString(const bson_t* cmd) {
    bson_iter_t it;
    if (bson_iter_init(&it, cmd) && bson_iter_next(&it) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, nullptr);
    return {};
}

bool boolField(const bson_t* d, const char* k) {
    bson_iter_t it;
    return bson_iter_init_find(&it, d, k) && bson_iter_as_bool(&it);
}

bool inList(std::string_view name, std::initializer_list<std::string_view> list) {
    return std::find(list.begin(), list.end(), name) != list.end();
}

/// The collection the command names in its first field, as an exact namespace.
RP commandNs(std::string_view db, const bson_t* cmd) {
    return RP::exact(std::string(db), firstString(cmd));
}

RP dbResource(std::string_view db) {
    return RP::database(std::string(db));
}

/// Every privilege root has: what a command without a rule needs.
std::vector<Alternative> rootEquivalent() {
    Alternative a;
    for (auto& p : builtinRolePrivileges({"root", "admin"}))
        a.needs.push_back({std::move(p.resource), p.actions});
    return {std::move(a)};
}

/// Role names of the command's `roles` array (strings are roles of `db`).
std::vector<RoleName> roleNames(const bson_t* cmd, const char* field, std::string_view db) {
    bson_t arr;
    if (!bson::subDocument(cmd, field, &arr)) return {};
    return roleNamesIn(&arr, db);
}

/// grantRole (or revokeRole) on the database of every role named.
void needOnRoleDbs(Rule& r, const std::vector<RoleName>& roles, A action) {
    for (const auto& role : roles) r.need(dbResource(role.db), {action});
}

/// Granting (or revoking) privileges: grantRole on the database a database or
/// namespace privilege names, on admin for any other resource.
void needForPrivileges(Rule& r, const bson_t* cmd, A action) {
    bson_t arr;
    if (!bson::subDocument(cmd, "privileges", &arr)) return;
    auto parsed = parsePrivileges(&arr, "privileges");
    if (!parsed.isOK()) return;  // the command refuses it
    for (const auto& p : parsed.getValue())
        r.need(p.resource.namesDatabase() ? dbResource(p.resource.db()) : dbResource("admin"),
               {action});
}

// --- aggregate -------------------------------------------------------------------

/// A namespace a stage names: "coll" (in `db`) or {db, coll}.
std::optional<RP> stageNamespace(const bson_iter_t& v, std::string_view db,
                                 const char* dbField = "db", const char* collField = "coll") {
    if (BSON_ITER_HOLDS_UTF8(&v)) return RP::exact(std::string(db), bson_iter_utf8(&v, nullptr));
    if (BSON_ITER_HOLDS_DOCUMENT(&v)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&v, &len, &data);
        bson::View d(data, len);
        std::string sdb = bson::stringField(d.get(), dbField);
        std::string coll = bson::stringField(d.get(), collField);
        return RP::exact(sdb.empty() ? std::string(db) : sdb, coll);
    }
    return std::nullopt;
}

void pipelineNeeds(Rule& r, const bson_t* pipeline, std::string_view db, bool bypass, int depth);

void subPipeline(Rule& r, const bson_t* stageArg, const char* field, std::string_view db,
                 bool bypass, int depth) {
    bson_t sub;
    if (bson::subDocument(stageArg, field, &sub)) pipelineNeeds(r, &sub, db, bypass, depth + 1);
}

/// The privileges the stages of `pipeline` need beyond reading its source:
/// the collections they read ($lookup, $graphLookup, $unionWith, nested
/// pipelines) and write ($out, $merge).
void pipelineNeeds(Rule& r, const bson_t* pipeline, std::string_view db, bool bypass, int depth) {
    if (depth > 32) {
        r.replace(rootEquivalent());  // absurd nesting: no one but root
        return;
    }
    bson_iter_t it;
    if (!bson_iter_init(&it, pipeline)) return;
    while (bson_iter_next(&it)) {
        bson_iter_t st;
        if (!BSON_ITER_HOLDS_DOCUMENT(&it) || !bson_iter_recurse(&it, &st) || !bson_iter_next(&st))
            continue;
        std::string_view name = bson_iter_key(&st);
        bson_t arg;
        bool argIsDoc = false;
        if (BSON_ITER_HOLDS_DOCUMENT(&st)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&st, &len, &data);
            argIsDoc = bson_init_static(&arg, data, len);
        }
        if (name == "$lookup" || name == "$graphLookup") {
            if (!argIsDoc) continue;
            bson_iter_t from;
            if (bson_iter_init_find(&from, &arg, "from"))
                if (auto ns = stageNamespace(from, db)) r.need(*ns, {A::find});
            subPipeline(r, &arg, "pipeline", db, bypass, depth);
        } else if (name == "$unionWith") {
            if (auto ns = stageNamespace(st, db, "db", "coll")) r.need(*ns, {A::find});
            if (argIsDoc) subPipeline(r, &arg, "pipeline", db, bypass, depth);
        } else if (name == "$facet") {
            if (!argIsDoc) continue;
            bson_iter_t f;
            bson_iter_init(&f, &arg);
            while (bson_iter_next(&f)) {
                if (!BSON_ITER_HOLDS_ARRAY(&f)) continue;
                uint32_t len;
                const uint8_t* data;
                bson_iter_array(&f, &len, &data);
                bson::View sub(data, len);
                pipelineNeeds(r, sub.get(), db, bypass, depth + 1);
            }
        } else if (name == "$out") {
            if (auto ns = stageNamespace(st, db)) {
                ActionSet a{A::insert, A::remove};
                if (bypass) a.add(A::bypassDocumentValidation);
                r.need(*ns, a);
            }
        } else if (name == "$merge") {
            std::optional<RP> ns;
            std::string whenMatched = "merge", whenNotMatched = "insert";
            if (argIsDoc) {
                bson_iter_t into;
                if (bson_iter_init_find(&into, &arg, "into")) ns = stageNamespace(into, db);
                if (auto w = bson::stringField(&arg, "whenMatched"); !w.empty()) whenMatched = w;
                if (auto w = bson::stringField(&arg, "whenNotMatched"); !w.empty())
                    whenNotMatched = w;
            } else {
                ns = stageNamespace(st, db);
            }
            if (!ns) continue;
            ActionSet a;
            if (whenNotMatched == "insert") a.add(A::insert);
            if (whenMatched != "fail") a.add(A::update);
            if (a.empty()) a.add(A::update);
            if (bypass) a.add(A::bypassDocumentValidation);
            r.need(*ns, a);
        }
    }
}

void aggregateNeeds(Rule& r, std::string_view db, const bson_t* cmd) {
    bson_iter_t first;
    bool collectionless =
        bson_iter_init(&first, cmd) && bson_iter_next(&first) && !BSON_ITER_HOLDS_UTF8(&first);
    RP ns = commandNs(db, cmd);
    bson_t pipeline;
    if (!bson::subDocument(cmd, "pipeline", &pipeline)) bson_init(&pipeline);
    std::string stage;
    bson_t arg;
    bool argIsDoc = false;
    bson_iter_t it, st;
    if (bson_iter_init(&it, &pipeline) && bson_iter_next(&it) && BSON_ITER_HOLDS_DOCUMENT(&it) &&
        bson_iter_recurse(&it, &st) && bson_iter_next(&st)) {
        stage = bson_iter_key(&st);
        if (BSON_ITER_HOLDS_DOCUMENT(&st)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(&st, &len, &data);
            argIsDoc = bson_init_static(&arg, data, len);
        }
    }
    if (stage == "$changeStream") {
        // A whole cluster from admin, a whole database, or one collection.
        RP target = !collectionless ? ns : db == "admin" ? RP::anyNormal() : dbResource(db);
        r.need(target, {A::changeStream, A::find});
    } else if (stage == "$collStats") {
        r.need(ns, {A::collStats});
    } else if (stage == "$indexStats") {
        r.need(ns, {A::indexStats});
    } else if (stage == "$planCacheStats") {
        r.need(ns, {A::planCacheRead});
    } else if (stage == "$listSearchIndexes") {
        r.need(ns, {A::listSearchIndexes});
    } else if (stage == "$currentOp") {
        if (argIsDoc && boolField(&arg, "allUsers")) r.need(RP::cluster(), {A::inprog});
    } else if (stage == "$listLocalSessions" || stage == "$listSessions") {
        if (argIsDoc && boolField(&arg, "allUsers")) r.need(RP::cluster(), {A::listSessions});
    } else if (stage == "$queryStats") {
        r.need(RP::cluster(), {A::queryStatsRead});
    } else if (stage == "$documents") {
        // Documents given in the command: nothing to read.
    } else if (collectionless) {
        r.need(dbResource(db), {A::find});  // refused by the command: no collection
    } else {
        r.need(ns, {A::find});
    }
    pipelineNeeds(r, &pipeline, db, boolField(cmd, "bypassDocumentValidation"), 0);
}

// --- users and roles --------------------------------------------------------------

bool isSelf(const Identity* self, std::string_view user, std::string_view db) {
    return self && self->user == user && self->db == db;
}

/// usersInfo: viewUser on each named user's database (never on oneself).
void usersInfoNeeds(Rule& r, std::string_view db, const bson_t* cmd, const Identity* self) {
    bson_iter_t it;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it)) return;
    auto one = [&](bson_iter_t* v) {
        std::string user, udb(db);
        if (BSON_ITER_HOLDS_UTF8(v)) {
            user = bson_iter_utf8(v, nullptr);
        } else if (BSON_ITER_HOLDS_DOCUMENT(v)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(v, &len, &data);
            bson::View d(data, len);
            user = bson::stringField(d.get(), "user");
            udb = bson::stringField(d.get(), "db");
        }
        if (!isSelf(self, user, udb)) r.need(dbResource(udb), {A::viewUser});
    };
    if (BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t* data;
        bson_iter_document(&it, &len, &data);
        bson::View d(data, len);
        if (boolField(d.get(), "forAllDBs")) {
            r.need(RP::cluster(), {A::viewUser});
            return;
        }
        one(&it);
    } else if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t a;
        bson_iter_recurse(&it, &a);
        while (bson_iter_next(&a)) one(&a);
    } else if (BSON_ITER_HOLDS_UTF8(&it)) {
        one(&it);
    } else {
        r.need(dbResource(db), {A::viewUser});  // usersInfo: 1
    }
}

/// rolesInfo: viewRole on each named role's database (never for a role one holds).
void rolesInfoNeeds(Rule& r, std::string_view db, const bson_t* cmd, const Identity* self) {
    bson_iter_t it;
    if (!bson_iter_init(&it, cmd) || !bson_iter_next(&it)) return;
    auto one = [&](bson_iter_t* v) {
        RoleName role{"", std::string(db)};
        if (BSON_ITER_HOLDS_UTF8(v)) {
            role.role = bson_iter_utf8(v, nullptr);
        } else if (BSON_ITER_HOLDS_DOCUMENT(v)) {
            uint32_t len;
            const uint8_t* data;
            bson_iter_document(v, &len, &data);
            bson::View d(data, len);
            role = {bson::stringField(d.get(), "role"), bson::stringField(d.get(), "db")};
        }
        bool held =
            self && std::find(self->roles.begin(), self->roles.end(), role) != self->roles.end();
        if (!held) r.need(dbResource(role.db), {A::viewRole});
    };
    if (BSON_ITER_HOLDS_ARRAY(&it)) {
        bson_iter_t a;
        bson_iter_recurse(&it, &a);
        while (bson_iter_next(&a)) one(&a);
    } else if (BSON_ITER_HOLDS_UTF8(&it) || BSON_ITER_HOLDS_DOCUMENT(&it)) {
        one(&it);
    } else {
        r.need(dbResource(db), {A::viewRole});  // rolesInfo: 1
    }
}

void updateUserNeeds(Rule& r, std::string_view db, const bson_t* cmd, const Identity* self) {
    std::string user = firstString(cmd);
    bool own = isSelf(self, user, db);
    auto ownOr = [&](A ownAction, A anyAction) {
        if (own)
            r.needOneOf({{{dbResource(db), {ownAction}}}, {{dbResource(db), {anyAction}}}});
        else
            r.need(dbResource(db), {anyAction});
    };
    if (bson_has_field(cmd, "pwd") || bson_has_field(cmd, "mechanisms"))
        ownOr(A::changeOwnPassword, A::changePassword);
    if (bson_has_field(cmd, "customData")) ownOr(A::changeOwnCustomData, A::changeCustomData);
    if (bson_has_field(cmd, "roles")) {
        // The roles it may revoke are unknown: the right to revoke any role.
        r.need(RP::anyNormal(), {A::revokeRole});
        needOnRoleDbs(r, roleNames(cmd, "roles", db), A::grantRole);
    }
    if (bson_has_field(cmd, "authenticationRestrictions"))
        r.need(dbResource(db), {A::setAuthenticationRestriction});
}

/// mongod's renameCollection rule.
std::vector<Alternative> renameAlternatives(const bson_t* cmd) {
    RP from = RP::forNamespace(firstString(cmd));
    RP to = RP::forNamespace(bson::stringField(cmd, "to"));
    bool dropTarget = boolField(cmd, "dropTarget");
    std::vector<Alternative> out;
    if (from.db() == to.db() && isNormalCollection(from.db(), from.collection()) &&
        isNormalCollection(to.db(), to.collection())) {
        // Within a database: renameCollectionSameDB, when the caller can read
        // the source or cannot read the target (no read access is gained).
        Alternative base;
        base.needs.push_back({dbResource(from.db()), {A::renameCollectionSameDB}});
        if (dropTarget) base.needs.push_back({to, {A::dropCollection}});
        Alternative canReadSource = base;
        canReadSource.needs.push_back({from, {A::find}});
        Alternative cannotReadTarget = base;
        cannotReadTarget.without.push_back({to, {A::find}});
        out.push_back(std::move(canReadSource));
        out.push_back(std::move(cannotReadTarget));
    }
    Alternative general;
    general.needs.push_back({from, {A::find, A::dropCollection}});
    ActionSet target{A::insert, A::createIndex};
    if (dropTarget) target.add(A::dropCollection);
    general.needs.push_back({to, target});
    out.push_back(std::move(general));
    return out;
}

void writeNeeds(Rule& r, std::string_view name, std::string_view db, const bson_t* cmd) {
    RP ns = commandNs(db, cmd);
    ActionSet a;
    if (name == "insert") {
        a.add(A::insert);
    } else if (name == "delete") {
        a.add(A::remove);
    } else if (name == "update") {
        a.add(A::update);
        bson_t ups;
        bson_iter_t u;
        if (bson::subDocument(cmd, "updates", &ups) && bson_iter_init(&u, &ups))
            while (bson_iter_next(&u)) {
                bson_iter_t f;
                if (BSON_ITER_HOLDS_DOCUMENT(&u) && bson_iter_recurse(&u, &f) &&
                    bson_iter_find(&f, "upsert") && bson_iter_as_bool(&f))
                    a.add(A::insert);
            }
    } else {  // findAndModify
        a.add(A::find);
        if (boolField(cmd, "remove")) {
            a.add(A::remove);
        } else {
            a.add(A::update);
            if (boolField(cmd, "upsert")) a.add(A::insert);
        }
    }
    if (name != "delete" && boolField(cmd, "bypassDocumentValidation"))
        a.add(A::bypassDocumentValidation);
    r.need(ns, a);
}

}  // namespace

CommandAccess commandAccess(std::string_view name, std::string_view db, const bson_t* cmd,
                            const Identity* self) {
    CommandAccess access;
    if (inList(name,
               {"hello", "isMaster", "ismaster", "saslStart", "saslContinue", "ping", "buildInfo",
                "buildinfo", "connectionStatus", "logout", "_isSelf", "configureFailPoint"})) {
        // configureFailPoint: only with enableTestCommands, then open to anyone, as mongod.
        access.requiresAuth = false;
        return access;
    }
    Rule r;
    RP ns = commandNs(db, cmd);
    RP database = dbResource(db);
    if (inList(name, {"endSessions", "startSession", "refreshSessions", "killSessions",
                      "commitTransaction", "abortTransaction", "listCommands", "whatsmyuri",
                      "listDatabases", "getMore", "killCursors", "killOp"})) {
        // Any authenticated user; getMore/killCursors check whose cursor it is,
        // killOp whose operation, listDatabases lists what the user may see.
    } else if (inList(name, {"find", "count", "distinct"})) {
        r.need(ns, {A::find});
    } else if (inList(name, {"insert", "update", "delete", "findAndModify", "findandmodify"})) {
        writeNeeds(r, name == "findandmodify" ? "findAndModify" : name, db, cmd);
    } else if (name == "create") {
        std::string viewOn = bson::stringField(cmd, "viewOn");
        if (!viewOn.empty()) {
            r.need(ns, {A::createCollection});
            r.need(RP::exact(std::string(db), viewOn), {A::find});
            bson_t pipeline;
            if (bson::subDocument(cmd, "pipeline", &pipeline))
                pipelineNeeds(r, &pipeline, db, false, 0);
        } else {
            r.needOneOf({{{ns, {A::createCollection}}}, {{ns, {A::insert}}}});
        }
        if (boolField(cmd, "capped")) r.need(ns, {A::convertToCapped});
    } else if (name == "drop") {
        r.need(ns, {A::dropCollection});
    } else if (name == "createIndexes") {
        r.need(ns, {A::createIndex});
    } else if (inList(name, {"dropIndexes", "deleteIndexes"})) {
        r.need(ns, {A::dropIndex});
    } else if (name == "listIndexes") {
        r.need(ns, {A::listIndexes});
    } else if (name == "listCollections") {
        // {authorizedCollections: true, nameOnly: true} lists the collections the
        // user has privileges on (the command filters); otherwise listCollections.
        if (!(boolField(cmd, "authorizedCollections") && boolField(cmd, "nameOnly")))
            r.need(database, {A::listCollections});
    } else if (name == "collStats") {
        r.need(ns, {A::collStats});
    } else if (name == "dbStats") {
        r.need(database, {A::dbStats});
    } else if (name == "collMod") {
        r.need(ns, {A::collMod});
        if (std::string viewOn = bson::stringField(cmd, "viewOn"); !viewOn.empty())
            r.need(RP::exact(std::string(db), viewOn), {A::find});
    } else if (name == "dropDatabase") {
        r.need(database, {A::dropDatabase});
    } else if (name == "renameCollection") {
        r.replace(renameAlternatives(cmd));
    } else if (name == "validate") {
        r.need(ns, {A::validate});
    } else if (name == "compact") {
        r.need(ns, {A::compact});
    } else if (name == "createSearchIndexes") {
        r.need(ns, {A::createSearchIndexes});
    } else if (name == "updateSearchIndex") {
        r.need(ns, {A::updateSearchIndex});
    } else if (name == "dropSearchIndex") {
        r.need(ns, {A::dropSearchIndex});
    } else if (name == "profile") {
        r.need(database, {A::enableProfiler});
    } else if (name == "aggregate") {
        aggregateNeeds(r, db, cmd);
    } else if (name == "explain") {
        bson_t inner;
        bson_iter_t first;
        if (bson::subDocument(cmd, "explain", &inner) && bson_iter_init(&first, &inner) &&
            bson_iter_next(&first) && std::string_view(bson_iter_key(&first)) != "explain")
            return commandAccess(bson_iter_key(&first), db, &inner, self);
        r.replace(rootEquivalent());
    } else if (name == "createUser") {
        r.need(database, {A::createUser});
        needOnRoleDbs(r, roleNames(cmd, "roles", db), A::grantRole);
    } else if (name == "updateUser") {
        updateUserNeeds(r, db, cmd, self);
    } else if (name == "grantRolesToUser") {
        needOnRoleDbs(r, roleNames(cmd, "roles", db), A::grantRole);
    } else if (name == "revokeRolesFromUser") {
        needOnRoleDbs(r, roleNames(cmd, "roles", db), A::revokeRole);
    } else if (inList(name, {"dropUser", "dropAllUsersFromDatabase"})) {
        r.need(database, {A::dropUser});
    } else if (name == "usersInfo") {
        usersInfoNeeds(r, db, cmd, self);
    } else if (name == "createRole") {
        r.need(database, {A::createRole});
        needOnRoleDbs(r, roleNames(cmd, "roles", db), A::grantRole);
        needForPrivileges(r, cmd, A::grantRole);
    } else if (name == "updateRole") {
        r.need(RP::anyNormal(), {A::revokeRole});
        needOnRoleDbs(r, roleNames(cmd, "roles", db), A::grantRole);
        needForPrivileges(r, cmd, A::grantRole);
        if (bson_has_field(cmd, "authenticationRestrictions"))
            r.need(database, {A::setAuthenticationRestriction});
    } else if (name == "grantPrivilegesToRole") {
        needForPrivileges(r, cmd, A::grantRole);
    } else if (name == "revokePrivilegesFromRole") {
        needForPrivileges(r, cmd, A::revokeRole);
    } else if (name == "grantRolesToRole") {
        needOnRoleDbs(r, roleNames(cmd, "roles", db), A::grantRole);
    } else if (name == "revokeRolesFromRole") {
        needOnRoleDbs(r, roleNames(cmd, "roles", db), A::revokeRole);
    } else if (inList(name, {"dropRole", "dropAllRolesFromDatabase"})) {
        r.need(database, {A::dropRole});
    } else if (name == "rolesInfo") {
        rolesInfoNeeds(r, db, cmd, self);
    } else if (name == "serverStatus") {
        r.need(RP::cluster(), {A::serverStatus});
    } else if (name == "hostInfo") {
        r.need(RP::cluster(), {A::hostInfo});
    } else if (name == "getLog") {
        r.need(RP::cluster(), {A::getLog});
    } else if (name == "getCmdLineOpts") {
        r.need(RP::cluster(), {A::getCmdLineOpts});
    } else if (name == "getParameter") {
        r.need(RP::cluster(), {A::getParameter});
    } else if (name == "replSetGetStatus") {
        r.need(RP::cluster(), {A::replSetGetStatus});
    } else if (name == "replSetGetConfig") {
        r.need(RP::cluster(), {A::replSetGetConfig});
    } else if (name == "getFreeMonitoringStatus") {
        r.need(RP::cluster(), {A::checkFreeMonitoringStatus});
    } else if (name == "top") {
        r.need(RP::cluster(), {A::top});
    } else if (name == "connPoolStats") {
        r.need(RP::cluster(), {A::connPoolStats});
    } else if (name == "currentOp") {
        if (!boolField(cmd, "$ownOps")) r.need(RP::cluster(), {A::inprog});
    } else if (name == "fsync") {
        r.need(RP::cluster(), {A::fsync});
    } else if (name == "replSetInitiate") {
        r.need(RP::cluster(), {A::replSetConfigure});
    } else if (name == "killAllSessions" || name == "killAllSessionsByPattern") {
        r.need(RP::cluster(), {A::killAnySession});
    } else if (name == "shutdown") {
        r.need(RP::cluster(), {A::shutdown});
    } else {
        r.replace(rootEquivalent());
    }
    access.anyOf = std::move(r).done();
    return access;
}

bool isAuthorized(const PrivilegeSet& held, const std::vector<Alternative>& anyOf) {
    if (anyOf.empty()) return true;
    for (const auto& alt : anyOf) {
        bool ok = std::all_of(alt.needs.begin(), alt.needs.end(), [&](const Need& n) {
            return held.isAuthorized(n.resource, n.actions);
        });
        ok = ok && std::none_of(alt.without.begin(), alt.without.end(), [&](const Need& n) {
                 return held.isAuthorized(n.resource, n.actions);
             });
        if (ok) return true;
    }
    return false;
}

}  // namespace halo::store::authz
