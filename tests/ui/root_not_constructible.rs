use rocketmq_runtime::RootServiceContext;

fn main() {
    let _root = RootServiceContext::new();
}
