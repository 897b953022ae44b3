//! `ledger`: a hash-chained ledger on versioned objects (`UStore` §4.4).
//!
//! Blocks are the versions of one key, `chain`, each derived from the block
//! before, so their ids are the hash chain and a block's height is its
//! version's depth. An account is a key `acct/NAME` whose versions are its
//! balances (a decimal integer). A block's value records the transfers it
//! applied and the account versions it produced:
//! `{"transfers": [{"from": "alice"|null, "to": "bob", "amount": 5}], "accounts": {"alice": ID, "bob": ID}}`
//! (`from` null is a deposit). The branch `head` of `chain`, moved with
//! compare-and-set, names the latest block.
//!
//! A balance is read from the chain: the newest block at or below the one
//! asked for that changed the account names its version, so a balance "as
//! of block b" costs the blocks walked back from b (in batches of
//! [`LOOKBACK_BATCH`] through `history_values`) and one read.
//!
//! ```text
//! ledger --store STORE deposit ACCT AMOUNT
//! ledger --store STORE transfer FROM TO AMOUNT
//! ledger --store STORE balance ACCT [--at BLOCK]
//! ledger --store STORE history ACCT [-n 20]
//! ledger --store STORE blocks [-n 20]
//! ledger --store STORE verify
//! ```

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{bail, Context as _};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use varve_example_objects::open_objects;
use varve_example_objects::say;
use varve_example_objects::tree::{tree_from_json, tree_to_json, Tree};
use varve_object::{ObjectStore, Version};

/// The key whose versions are the blocks.
const CHAIN: &str = "chain";
/// The branch of `chain` naming the latest block.
const HEAD: &str = "head";
/// Where an account's versions are: `ACCOUNT_PREFIX + name`.
const ACCOUNT_PREFIX: &str = "acct/";
/// Blocks read per `history_values` call while looking back for an account.
const LOOKBACK_BATCH: usize = 64;
/// The longest account name.
const ACCOUNT_NAME_BYTES_MAX: usize = 64;

#[derive(Parser)]
#[command(name = "ledger", about = "A hash-chained ledger on Varve versioned objects (UStore §4.4)")]
struct Cli {
    /// The store: a directory (the embedded journal) or a varve:// or nats:// URI.
    #[arg(long, global = true)]
    store: Option<String>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Credit AMOUNT to ACCT (a block with one deposit).
    Deposit { account: String, amount: u64 },
    /// Move AMOUNT from FROM to TO (a block with one transfer); refused if FROM has less.
    Transfer { from: String, to: String, amount: u64 },
    /// The balance of ACCT, now or as of block BLOCK (a height, or a block id of 4+ hex digits).
    Balance {
        account: String,
        #[arg(long)]
        at: Option<String>,
    },
    /// The versions of ACCT, newest first, with the balance each holds.
    History {
        account: String,
        #[arg(short = 'n', long, default_value_t = 20)]
        n: usize,
    },
    /// The latest blocks, newest first.
    Blocks {
        #[arg(short = 'n', long, default_value_t = 20)]
        n: usize,
    },
    /// Recompute every block and account version from the stored bytes, and replay the transfers.
    Verify,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let Some(store) = cli.store else { bail!("--store is required: a directory or a varve:// URI") };
    let objects = open_objects(&store, "ledger").with_context(|| format!("opening store {store}"))?;
    let ledger = Ledger { objects };
    match cli.command {
        Cmd::Deposit { account, amount } => ledger.append(None, &account, amount),
        Cmd::Transfer { from, to, amount } => ledger.append(Some(&from), &to, amount),
        Cmd::Balance { account, at } => ledger.balance(&account, at.as_deref()),
        Cmd::History { account, n } => ledger.history(&account, n),
        Cmd::Blocks { n } => ledger.blocks(n),
        Cmd::Verify => ledger.verify(),
    }
}

/// One transfer of a block; `from` `None` is a deposit.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Transfer {
    from: Option<String>,
    to: String,
    amount: u64,
}

/// A block's value.
struct Block {
    transfers: Vec<Transfer>,
    /// Account name → the version this block produced.
    accounts: Tree,
}

impl Block {
    fn encode(&self) -> Vec<u8> {
        let transfers: Vec<Value> =
            self.transfers.iter().map(|t| json!({"from": t.from, "to": t.to, "amount": t.amount})).collect();
        json!({"transfers": transfers, "accounts": tree_to_json(&self.accounts)}).to_string().into_bytes()
    }

    fn decode(v: &Version, value: &[u8]) -> anyhow::Result<Block> {
        let bad = || format!("block {} (height {}) is not a ledger block", v.id.short(12), v.depth);
        let value: Value = serde_json::from_slice(value).with_context(bad)?;
        let mut transfers = Vec::new();
        for t in value["transfers"].as_array().with_context(bad)? {
            transfers.push(Transfer {
                from: t["from"].as_str().map(str::to_owned),
                to: t["to"].as_str().with_context(bad)?.to_owned(),
                amount: t["amount"].as_u64().with_context(bad)?,
            });
        }
        let accounts = tree_from_json(&value["accounts"]).map_err(anyhow::Error::msg).with_context(bad)?;
        Ok(Block { transfers, accounts })
    }
}

struct Ledger {
    objects: ObjectStore,
}

impl Ledger {
    fn append(&self, from: Option<&str>, to: &str, amount: u64) -> anyhow::Result<()> {
        for name in from.into_iter().chain([to]) {
            check_account_name(name)?;
        }
        if amount == 0 {
            bail!("an amount is a whole number of 1 or more");
        }
        if from == Some(to) {
            bail!("a transfer from {to} to itself changes nothing");
        }
        let head = self.head()?;
        let mut accounts = Tree::new();
        let mut balances = Vec::new();
        if let Some(from) = from {
            let (version, balance) = self.account_at(head.as_ref(), from)?.unzip();
            let balance = balance.unwrap_or(0);
            if balance < amount {
                bail!("overdraft refused: {from} has {balance}, the transfer needs {amount}");
            }
            let v = self.put_balance(from, version.as_ref(), balance - amount)?;
            accounts.insert(from.to_owned(), v.id);
            balances.push(format!("{from} {}", balance - amount));
        }
        let (version, balance) = self.account_at(head.as_ref(), to)?.unzip();
        let balance = balance.unwrap_or(0).checked_add(amount).context("the balance would overflow a u64")?;
        let v = self.put_balance(to, version.as_ref(), balance)?;
        accounts.insert(to.to_owned(), v.id);
        balances.push(format!("{to} {balance}"));
        let transfer = Transfer { from: from.map(str::to_owned), to: to.to_owned(), amount };
        let block = Block { transfers: vec![transfer], accounts };
        let head_id = head.map(|h| h.id);
        let b = self.objects.put(CHAIN, head_id.as_ref(), &block.encode())?;
        self.objects.set_branch(CHAIN, HEAD, head_id.as_ref(), &b.id)?;
        let what = from.map_or_else(|| format!("deposit {amount} to {to}"), |f| format!("{f} -> {to} {amount}"));
        say!("block {} {}: {what} ({})", b.depth, b.id.short(12), balances.join(", "));
        Ok(())
    }

    fn put_balance(&self, name: &str, base: Option<&Version>, balance: u64) -> anyhow::Result<Version> {
        let key = format!("{ACCOUNT_PREFIX}{name}");
        Ok(self.objects.put(&key, base.map(|b| &b.id), balance.to_string().as_bytes())?)
    }

    fn balance(&self, name: &str, at: Option<&str>) -> anyhow::Result<()> {
        check_account_name(name)?;
        let block = match at {
            Some(text) => Some(self.block(text)?),
            None => self.head()?,
        };
        let Some(block) = block else { bail!("the ledger has no blocks yet") };
        match self.account_at(Some(&block), name)? {
            Some((v, balance)) => say!(
                "{name}: {balance} as of block {} {} (account version {})",
                block.depth,
                block.id.short(12),
                v.id.short(12)
            ),
            None => say!("{name}: 0 as of block {} {} (no account yet)", block.depth, block.id.short(12)),
        }
        Ok(())
    }

    fn history(&self, name: &str, n: usize) -> anyhow::Result<()> {
        check_account_name(name)?;
        let Some((v, balance)) = self.account_at(self.head()?.as_ref(), name)? else {
            bail!("no account {name}");
        };
        say!("{} {balance}", v.id.short(12));
        let key = format!("{ACCOUNT_PREFIX}{name}");
        for (v, value) in self.objects.history_values(&key, &v.id, n.saturating_sub(1))? {
            say!("{} {}", v.id.short(12), String::from_utf8_lossy(&value));
        }
        Ok(())
    }

    fn blocks(&self, n: usize) -> anyhow::Result<()> {
        let Some(head) = self.head()? else { bail!("the ledger has no blocks yet") };
        let mut listed = vec![(head, self.objects.get(CHAIN, &head.id)?)];
        listed.extend(self.objects.history_values(CHAIN, &head.id, n.saturating_sub(1))?);
        for (v, value) in listed {
            let block = Block::decode(&v, &value)?;
            let what: Vec<String> = block
                .transfers
                .iter()
                .map(|t| match &t.from {
                    Some(f) => format!("{f} -> {} {}", t.to, t.amount),
                    None => format!("deposit {} to {}", t.amount, t.to),
                })
                .collect();
            say!("{} {} {}", v.depth, v.id.short(12), what.join("; "));
        }
        Ok(())
    }

    /// Check, from the stored bytes: every block and account version hashes
    /// to its id; the blocks form one chain ending at `head`; replaying the
    /// transfers gives the balance each recorded account version holds; and
    /// every account version is one a block recorded.
    fn verify(&self) -> anyhow::Result<()> {
        let Some(head) = self.head()? else { bail!("the ledger has no blocks yet") };
        let mut checked = 0;
        // Every head, not only the ref's: a block appended beside the chain is checked (and refused) too.
        for v in self.objects.heads(CHAIN)? {
            checked += self.objects.verify(CHAIN, &v.id)?.versions;
            if v.id != head.id {
                bail!("block {} (height {}) is not on the chain that ends at head {}", v.id, v.depth, head.id);
            }
        }
        let mut blocks = self.objects.history_values(CHAIN, &head.id, usize::MAX)?;
        blocks.reverse();
        blocks.push((head, self.objects.get(CHAIN, &head.id)?));
        let mut balances: BTreeMap<String, u64> = BTreeMap::new();
        let mut recorded: Tree = Tree::new();
        for (v, value) in &blocks {
            let block = Block::decode(v, value)?;
            for t in &block.transfers {
                if let Some(from) = &t.from {
                    let balance = balances.entry(from.clone()).or_default();
                    *balance = balance
                        .checked_sub(t.amount)
                        .with_context(|| format!("block {} (height {}) overdraws {from}", v.id, v.depth))?;
                }
                let balance = balances.entry(t.to.clone()).or_default();
                *balance = balance.checked_add(t.amount).context("a balance overflows")?;
            }
            for (name, id) in &block.accounts {
                let key = format!("{ACCOUNT_PREFIX}{name}");
                let stored = self.objects.get(&key, id)?;
                let expected = balances.get(name).copied().unwrap_or(0).to_string();
                if stored != expected.as_bytes() {
                    bail!(
                        "account version {id} of {name} holds {}, but replaying the blocks to height {} gives {expected}",
                        String::from_utf8_lossy(&stored),
                        v.depth
                    );
                }
                let parent = self.objects.previous(&key, id)?.first().map(|p| p.id);
                if parent != recorded.get(name).copied() {
                    bail!("account version {id} of {name} does not follow the version the block before recorded");
                }
                recorded.insert(name.clone(), *id);
            }
        }
        for key in self.objects.keys()? {
            let Some(name) = key.strip_prefix(ACCOUNT_PREFIX) else { continue };
            for v in self.objects.heads(&key)? {
                checked += self.objects.verify(&key, &v.id)?.versions;
                if recorded.get(name) != Some(&v.id) {
                    bail!("account version {} of {name} is recorded by no block", v.id);
                }
            }
        }
        say!(
            "verified: {} blocks up to head {}, {} accounts, {checked} versions rehashed",
            blocks.len(),
            head.id.short(12),
            recorded.len()
        );
        Ok(())
    }

    // ----- helpers --------------------------------------------------------

    fn head(&self) -> anyhow::Result<Option<Version>> {
        Ok(self.objects.refs(CHAIN)?.get(HEAD).map(|t| t.version))
    }

    /// The block `text` names: a height (all decimal digits), or a block id
    /// (a unique prefix of 4 or more hex digits, or the full id).
    fn block(&self, text: &str) -> anyhow::Result<Version> {
        let Some(head) = self.head()? else { bail!("the ledger has no blocks yet") };
        if !text.is_empty() && text.bytes().all(|c| c.is_ascii_digit()) {
            let height: u64 = text.parse().with_context(|| format!("block height {text}"))?;
            if height == 0 || height > head.depth {
                bail!("no block at height {height}: the chain has {} blocks", head.depth);
            }
            if height == head.depth {
                return Ok(head);
            }
            let back = usize::try_from(head.depth - height)?;
            let path = self.objects.history(CHAIN, &head.id, back)?;
            return path.last().copied().with_context(|| format!("no block at height {height}"));
        }
        Ok(self.objects.resolve(CHAIN, text)?)
    }

    /// The version of account `name` and its balance as of `block`: what
    /// the newest block at or below it that changed the account recorded.
    fn account_at(&self, block: Option<&Version>, name: &str) -> anyhow::Result<Option<(Version, u64)>> {
        let Some(&block) = block else { return Ok(None) };
        let key = format!("{ACCOUNT_PREFIX}{name}");
        let mut batch = vec![(block, self.objects.get(CHAIN, &block.id)?)];
        loop {
            for (v, value) in &batch {
                if let Some(id) = Block::decode(v, value)?.accounts.get(name) {
                    let account = self.objects.info(&key, id)?.version;
                    let text = String::from_utf8(self.objects.get(&key, id)?).unwrap_or_default();
                    let balance = text.parse().with_context(|| {
                        format!("account version {} of {name} holds {text:?}, not a balance", id.short(12))
                    })?;
                    return Ok(Some((account, balance)));
                }
            }
            let Some((last, _)) = batch.last() else { return Ok(None) };
            batch = self.objects.history_values(CHAIN, &last.id, LOOKBACK_BATCH)?;
            if batch.is_empty() {
                return Ok(None);
            }
        }
    }
}

fn check_account_name(name: &str) -> anyhow::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= ACCOUNT_NAME_BYTES_MAX
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-');
    if !ok {
        bail!("account name {name:?}: use 1 to {ACCOUNT_NAME_BYTES_MAX} of [A-Za-z0-9_-]");
    }
    Ok(())
}
