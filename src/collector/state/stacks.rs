//! Which layers hold each series: the daemon's stack, a service's own (`[layers.services]`), or
//! a known coding agent's (its entry in [`crate::collector::ingest::agents`]).
//!
//! One team's daemon hears several agents, each behind layers of its own: Codex cuts every tool
//! output at 10,000 tokens, Claude Code its Bash output at 30,000 characters, Gemini CLI at
//! 40,000. Holding all of them to one stack would flag Codex's whole 30 KB outputs as over a
//! 16 KiB ceiling that does not exist for it, and miss nothing that matters. So every layer any
//! series can be held to is numbered in one stack ([`Stacks::all`]: the daemon's layers first,
//! at the indices they had, then the others), and each series keeps the sub-stack it is held to
//! ([`Profile`]), chosen once when the series is created: a configured service's stack first,
//! then a known agent's (each layer with the tools it applies to), else the daemon's.

use std::sync::Arc;

use crate::collector::ingest::agents::{AgentStack, Tools, AGENTS};
use crate::layers::{Ceiling, Stack, StackConfig};

/// The name of the daemon's own stack, for series no other stack claims.
pub(crate) const DAEMON: &str = "daemon";

/// The layers one series is held to.
#[derive(Debug, Clone)]
pub(crate) struct Profile {
    /// Whose stack it is: [`DAEMON`], a configured service's name, or an agent's.
    pub(crate) name: Arc<str>,
    /// Indices into [`Stacks::all`], weakest first.
    pub(crate) order: Arc<[usize]>,
}

/// Every stack a series can be held to.
#[derive(Debug, Clone)]
pub(crate) struct Stacks {
    /// Every layer, numbered once: the daemon's stack first (same indices), then the layers
    /// only the services' and agents' stacks name.
    pub(crate) all: Arc<Stack>,
    /// The daemon's stack.
    daemon: Profile,
    /// The configured services' stacks, by service name.
    services: Vec<(String, Profile)>,
    /// The agents' stacks: each layer's index with the tools it applies to.
    agents: Vec<(AgentStack, Vec<(usize, Tools)>)>,
}

impl Stacks {
    /// The stacks of a configuration: the daemon's `stack`, `[layers.services]` of `file`, and
    /// the known agents'. A layer id `file` does not resolve was refused when the configuration
    /// was loaded; one an agent's entry names and the catalog lacks is skipped (a test holds
    /// every agent's ids to the catalog).
    pub(crate) fn new(stack: &Stack, file: &StackConfig) -> Self {
        let configured = file.services.values().flatten().map(String::as_str);
        let agents = AGENTS
            .iter()
            .flat_map(|a| a.stack.layers.iter().map(|(id, _)| *id));
        let ids: Vec<&str> = configured.chain(agents).collect();
        let all = match stack.extended(ids.iter().copied(), file) {
            Ok(all) => all,
            // Only an id missing from the catalog gets here: add what resolves.
            Err(_) => ids
                .iter()
                .fold(stack.clone(), |s, id| s.extended([*id], file).unwrap_or(s)),
        };
        let index = |id: &str| all.layers().iter().position(|l| l.id() == id);
        let n = stack.layers().len();
        let daemon = Profile {
            name: DAEMON.into(),
            order: weakest_first(&all, &(0..n).collect::<Vec<_>>()).into(),
        };
        let services = file
            .services
            .iter()
            .map(|(service, ids)| {
                let mine: Vec<usize> = ids.iter().filter_map(|id| index(id)).collect();
                let order = weakest_first(&all, &mine);
                let profile = Profile {
                    name: service.as_str().into(),
                    order: order.into(),
                };
                (service.clone(), profile)
            })
            .collect();
        let agents = AGENTS
            .iter()
            .map(|a| {
                let layers = a
                    .stack
                    .layers
                    .iter()
                    .filter_map(|(id, tools)| Some((index(id)?, *tools)))
                    .collect();
                (a.stack, layers)
            })
            .collect();
        Self {
            all: Arc::new(all),
            daemon,
            services,
            agents,
        }
    }

    /// The stack of the daemon alone (no services, no agents), for tests.
    #[cfg(test)]
    pub(crate) fn daemon_only(stack: Stack) -> Self {
        let order = stack.select(|_| true).into();
        Self {
            all: Arc::new(stack),
            daemon: Profile {
                name: DAEMON.into(),
                order,
            },
            services: Vec::new(),
            agents: Vec::new(),
        }
    }

    /// The daemon's own stack.
    pub(crate) fn daemon(&self) -> &Profile {
        &self.daemon
    }

    /// The layers a series of `service` and `tool` is held to.
    pub(crate) fn profile(&self, service: &str, tool: &str) -> Profile {
        if let Some((_, p)) = self.services.iter().find(|(s, _)| s == service) {
            return p.clone();
        }
        if let Some((agent, layers)) = self.agents.iter().find(|(a, _)| a.serves(service)) {
            let mine: Vec<usize> = layers
                .iter()
                .filter(|(_, tools)| tools.applies(tool))
                .map(|(i, _)| *i)
                .collect();
            return Profile {
                name: agent.name.into(),
                order: weakest_first(&self.all, &mine).into(),
            };
        }
        self.daemon.clone()
    }

    /// The stacks other than the daemon's, for `/api/v1/layers`: each with the services it
    /// holds and its layers (with the tools each applies to), configured services first.
    pub(crate) fn others(&self) -> Vec<OtherStack> {
        let id = |i: usize| self.all.layers()[i].id().to_string();
        let configured = self.services.iter().map(|(service, p)| OtherStack {
            stack: service.clone(),
            services: vec![service.clone()],
            layers: p
                .order
                .iter()
                .map(|&i| (id(i), "all".to_string()))
                .collect(),
        });
        let agents = self.agents.iter().map(|(a, layers)| OtherStack {
            stack: a.name.to_string(),
            services: a.services.iter().map(|s| s.to_string()).collect(),
            layers: layers
                .iter()
                .map(|(i, tools)| (id(*i), tools.to_string()))
                .collect(),
        });
        configured.chain(agents).collect()
    }

    /// The ceiling of `profile`: its weakest layer's limit in bytes.
    pub(crate) fn ceiling(&self, profile: &Profile) -> Option<Ceiling<'_>> {
        self.all.ceiling_among(&profile.order)
    }
}

/// A stack other than the daemon's, as `/api/v1/layers` lists it.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct OtherStack {
    /// Its name.
    pub(crate) stack: String,
    /// The `service.name`s it holds (`*` ends a prefix).
    pub(crate) services: Vec<String>,
    /// Its layers in stack order, each with the tools it applies to.
    pub(crate) layers: Vec<(String, String)>,
}

/// `indices` of `stack`, weakest first.
fn weakest_first(stack: &Stack, indices: &[usize]) -> Vec<usize> {
    let layers = stack.layers();
    stack.select(|l| indices.iter().any(|&i| std::ptr::eq(&layers[i], l)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::find;

    fn stacks(file: &str) -> Stacks {
        let file: StackConfig = toml::from_str(file).unwrap();
        let stack = Stack::resolve(None, None, Some(&file)).unwrap();
        Stacks::new(&stack, &file)
    }

    fn ids(s: &Stacks, p: &Profile) -> Vec<String> {
        p.order
            .iter()
            .map(|&i| s.all.layers()[i].id().to_string())
            .collect()
    }

    /// The docs name every agent's stack where they list the stacks (the API's `stack` field,
    /// the per-agent table) and every `service.name` that selects it.
    #[test]
    fn the_docs_name_every_agent_stack_and_its_services() {
        let collector = include_str!("../../../docs/collector.md");
        let agents = include_str!("../../../docs/agents.md");
        let field = collector
            .split("- `stack` is the stack the series is held to")
            .nth(1)
            .and_then(|s| s.split("`ceiling` is").next())
            .expect("docs/collector.md: the `stack` field");
        for a in AGENTS {
            let name = a.stack.name;
            assert!(
                field.contains(&format!("`{name}`")),
                "docs/collector.md: `stack` field lacks {name}"
            );
            let row = format!("   | `{name}` | ");
            assert!(
                collector.contains(&row),
                "docs/collector.md: no stack table row for {name}"
            );
            for service in a.stack.services {
                assert!(
                    agents.contains(&format!("`{service}`")),
                    "docs/agents.md does not name the service {service} of {name}"
                );
            }
        }
    }

    #[test]
    fn every_agent_layer_is_in_the_catalog() {
        for a in AGENTS {
            for (id, _) in a.stack.layers {
                assert!(find(id).is_some(), "{}: {id}", a.stack.name);
            }
        }
    }

    #[test]
    fn each_agent_is_held_to_its_own_layers_by_tool() {
        let s = stacks("");
        assert_eq!(ids(&s, s.daemon()), ["default"]);
        let p = s.profile("claude-code", "Bash");
        assert_eq!(&*p.name, "claude-code");
        assert_eq!(
            ids(&s, &p),
            ["claude-code.bash", "claude-code.tool-result.persist"]
        );
        let read = s.profile("claude-code", "Read");
        assert!(ids(&s, &read).contains(&"claude-code.read.tokens".to_string()));
        assert!(!ids(&s, &read).contains(&"claude-code.bash".to_string()));
        let mcp = s.profile("claude-code", "mcp__files__read");
        assert!(ids(&s, &mcp).contains(&"claude-code.mcp.max".to_string()));
        for service in ["codex_exec", "codex_cli_rs", "codex-tui"] {
            let p = s.profile(service, "exec_command");
            assert_eq!(ids(&s, &p), ["codex.tool-output.tokens"], "{service}");
        }
        assert_eq!(
            ids(&s, &s.profile("gemini-cli", "run_shell_command")),
            ["gemini-cli.tool-output"]
        );
        assert_eq!(
            ids(&s, &s.profile("gemini-cli", "read_file")),
            ["gemini-cli.read-file.lines"]
        );
        // Anyone else: the daemon's stack; its layers keep their indices.
        assert_eq!(&*s.profile("my-agent", "search").name, DAEMON);
        assert_eq!(s.all.layers()[0].id(), "default");
        // The ceilings differ per agent.
        let c = |p: &Profile| s.ceiling(p).map(|c| (c.layer_id.to_string(), c.bytes));
        assert_eq!(c(s.daemon()), Some(("default".into(), 16_384)));
        assert_eq!(
            c(&s.profile("codex_exec", "x")).unwrap().0,
            "codex.tool-output.tokens"
        );
    }

    #[test]
    fn a_configured_service_stack_wins_over_the_agent_default() {
        let s = stacks(
            r#"
            stack = ["tempo.attr-bytes"]
            overrides = { "codex.tool-output.tokens" = 5000 }
            [services]
            "codex_exec" = ["codex.tool-output.tokens", "default"]
            "#,
        );
        let p = s.profile("codex_exec", "exec_command");
        assert_eq!(&*p.name, "codex_exec");
        assert_eq!(ids(&s, &p), ["default", "codex.tool-output.tokens"]);
        let codex = &s.all.layers()[p.order[1]];
        assert_eq!(codex.limit, 5000);
        assert_eq!(ids(&s, s.daemon()), ["tempo.attr-bytes"]);
        // The other codex originators keep the agent's stack.
        assert_eq!(&*s.profile("codex_cli_rs", "x").name, "codex");
    }
}
