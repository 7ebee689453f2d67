// validate's consistency check against a real WiredTiger engine: a consistent
// collection is valid; an index entry removed behind the store's back, or one
// pointing at no record, makes it invalid and is named.
#include "store/exec/collection_validator.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "store/storage/key_string.h"
#include "store/storage/record_store.h"

namespace halo::store {
namespace {

class CollectionValidatorTest : public ::testing::Test {
  protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("halo-validate-" + std::to_string(::getpid()) + "-" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::remove_all(dir_);
        StoreOptions opts;
        opts.dbPath = dir_.string();
        engine_ = uassertStatusOK(Engine::open(opts));
        catalog_ = std::make_unique<Catalog>(*engine_);
        ASSERT_TRUE(catalog_->load().isOK());
        ASSERT_TRUE(catalog_->createCollection("db.c", nullptr).isOK());
        auto spec = bson::Doc::fromJsonOrDie(R"({"key": {"a": 1}, "name": "a_1"})");
        ASSERT_TRUE(catalog_->createIndex("db.c", spec.get()).isOK());
        coll_ = catalog_->lookup("db.c");
        PooledSession s(catalog_->sessions());
        Txn txn(*s);
        for (int i = 0; i < 50; ++i) {
            auto d = bson::Doc::fromJsonOrDie(
                fmt::format(R"({{"_id": {}, "a": [{}, {}]}})", i, i, i + 100));
            rs::insert(*s, *coll_, d.get());
            coll_->numRecords++;
        }
        txn.commit();
    }
    void TearDown() override {
        coll_.reset();
        catalog_.reset();
        engine_.reset();
        std::filesystem::remove_all(dir_);
    }
    ValidateResults validate() {
        PooledSession s(catalog_->sessions());
        Txn txn(*s);
        return validateCollection(*s, *coll_);
    }
    /// Runs `f(cursor)` on the a_1 index table in a committed transaction.
    template <class F>
    void onIndex(F&& f) {
        PooledSession s(catalog_->sessions());
        Txn txn(*s);
        Cursor c = s->open(coll_->findIndex("a_1")->uri);
        f(c);
        c.close();
        txn.commit();
    }

    std::filesystem::path dir_;
    std::unique_ptr<Engine> engine_;
    std::unique_ptr<Catalog> catalog_;
    std::shared_ptr<const CollectionEntry> coll_;
};

TEST_F(CollectionValidatorTest, ConsistentCollectionIsValid) {
    auto r = validate();
    EXPECT_TRUE(r.valid());
    EXPECT_EQ(r.nrecords, 50);
    ASSERT_EQ(r.indexes.size(), 2u);
    EXPECT_EQ(r.indexes[0].keys, 50);   // _id_
    EXPECT_EQ(r.indexes[1].keys, 100);  // a_1: two keys per document
    EXPECT_TRUE(r.missingIndexEntries.empty());
    EXPECT_TRUE(r.extraIndexEntries.empty());
    EXPECT_TRUE(r.warnings.empty());
}

TEST_F(CollectionValidatorTest, MissingIndexEntryIsDetectedAndNamed) {
    onIndex([](Cursor& c) {
        ASSERT_EQ(c->next(c.get()), 0);
        ASSERT_EQ(c->remove(c.get()), 0);
    });
    auto r = validate();
    EXPECT_FALSE(r.valid());
    EXPECT_EQ(r.indexes[1].keys, 99);
    EXPECT_FALSE(r.indexes[1].valid);
    EXPECT_TRUE(r.indexes[0].valid);
    ASSERT_EQ(r.missingIndexEntries.size(), 1u);
    EXPECT_EQ(r.missingIndexEntries[0].toJson(),
              bson::Doc::fromJsonOrDie(
                  R"({"indexName": "a_1", "recordId": {"$numberLong": "1"}, "idKey": {"_id": 0}})")
                  .toJson());
    EXPECT_EQ(r.errors.front(), "Detected 1 missing index entries.");
}

TEST_F(CollectionValidatorTest, EntryWithoutRecordIsExtra) {
    std::string key;
    onIndex([&](Cursor& c) {
        ASSERT_EQ(c->next(c.get()), 0);
        WT_ITEM k;
        c->get_key(c.get(), &k);
        key.assign(static_cast<const char*>(k.data), k.size);
        // The same key for record 999, which does not exist.
        std::string other = key.substr(0, key.size() - keystring::kRecordIdSize);
        keystring::appendRecordId(other, 999);
        WT_ITEM nk{};
        nk.data = other.data();
        nk.size = other.size();
        WT_ITEM empty{};
        c->set_key(c.get(), &nk);
        c->set_value(c.get(), &empty);
        ASSERT_EQ(c->insert(c.get()), 0);
    });
    auto r = validate();
    EXPECT_FALSE(r.valid());
    EXPECT_EQ(r.indexes[1].keys, 101);
    ASSERT_EQ(r.extraIndexEntries.size(), 1u);
    EXPECT_NE(r.extraIndexEntries[0].toJson().find("999"), std::string::npos);
    EXPECT_TRUE(r.missingIndexEntries.empty());
}

TEST_F(CollectionValidatorTest, CountMismatchIsAWarning) {
    coll_->numRecords++;
    auto r = validate();
    EXPECT_TRUE(r.valid());
    ASSERT_EQ(r.warnings.size(), 1u);
}

}  // namespace
}  // namespace halo::store
