use rocketmq_runtime::TaskSpawner;

fn escape(spawner: &TaskSpawner) {
    let _handle = spawner.runtime_handle();
    let _group = spawner.task_group();
}

fn main() {}
