-- Static reference data: the categories of bank transactions. Ids are stable and referenced
-- by code and by "Transaction"."categoryId"; add new rows in a new migration, never renumber.
INSERT INTO "Category" ("id", "slug", "name") VALUES
    (1, 'groceries', 'Groceries'),
    (2, 'dining', 'Restaurants & cafés'),
    (3, 'transport', 'Transport'),
    (4, 'utilities', 'Utilities'),
    (5, 'rent', 'Rent & mortgage'),
    (6, 'salary', 'Salary & income'),
    (7, 'shopping', 'Shopping'),
    (8, 'health', 'Health'),
    (9, 'entertainment', 'Entertainment'),
    (10, 'travel', 'Travel'),
    (11, 'fees', 'Bank fees'),
    (12, 'transfers', 'Transfers'),
    (13, 'other', 'Other')
ON CONFLICT DO NOTHING;
