use rocketmq_runtime::TaskGroup;

fn main() {
    let _group = TaskGroup::new_root("forged", tokio::runtime::Handle::current());
}
